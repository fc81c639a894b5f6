//! Storage as kube checks it: a claim's spec (access modes, a storage request, its class and data
//! source), a volume's (its capacity, one source, its reclaim policy, a local volume's node), the
//! volume sources they share with pods, and StorageClasses.

use super::*;

pub(super) const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

/// Access modes (kube's `ValidatePersistentVolumeClaimSpec` and `ValidatePersistentVolumeSpec`): at
/// least one (`why` says so for a claim; a volume's says nothing), each known, and `ReadWriteOncePod`
/// alone.
fn access_modes(spec: &Value, why: &str, causes: &mut Vec<Cause>) {
    let modes = spec["accessModes"].as_array().map_or(&[][..], Vec::as_slice);
    if modes.is_empty() {
        let message = if why.is_empty() { "Required value".to_string() } else { format!("Required value: {why}") };
        push(causes, cause("FieldValueRequired", "spec.accessModes", message));
    }
    let mut known = 0;
    for mode in modes {
        if mode.as_str().is_some_and(|m| ACCESS_MODES.contains(&m)) {
            known += 1;
        } else {
            not_supported(causes, "spec.accessModes".into(), mode, ACCESS_MODES);
        }
    }
    if known > 1 && modes.iter().any(|m| m == "ReadWriteOncePod") {
        forbidden(causes, "spec.accessModes", "may not use ReadWriteOncePod with other access modes");
    }
}

fn class_and_mode(spec: &Value, causes: &mut Vec<Cause>) {
    if let Some(class) = spec["storageClassName"].as_str().filter(|c| !c.is_empty()) {
        for why in meta::dns1123_subdomain_errors(class) {
            invalid(causes, "spec.storageClassName".into(), format!("{class:?}"), &why);
        }
    }
    if let Some(map) = spec.as_object() {
        one_of_at(map, "volumeMode", "spec", &["Block", "Filesystem"], causes);
    }
}

/// A claim's spec on create (kube's `ValidatePersistentVolumeClaimSpec`; its selector is checked as
/// a label selector where it is).
pub(super) fn claim(spec: &Value, causes: &mut Vec<Cause>) {
    access_modes(spec, "at least 1 access mode is required", causes);
    // kube names the request at `spec.resources[storage]`.
    match spec["resources"]["requests"].get("storage").filter(|q| !q.is_null()) {
        None => required(causes, "spec.resources[storage]".into()),
        Some(q) => {
            let zero = Value::String("0".into());
            if crate::registry::quantity::compare(q, &zero).is_some_and(|o| o.is_le()) {
                let text = q.as_str().map_or_else(|| q.to_string(), str::to_string);
                invalid(causes, "spec.resources[storage]".into(), format!("{text:?}"), "must be greater than zero");
            }
        }
    }
    class_and_mode(spec, causes);
    // kube shows the path's Go struct here, with pointers' addresses; kgate the path.
    match (spec.get("dataSource").filter(|s| s.is_object()), spec.get("dataSourceRef").filter(|s| s.is_object())) {
        (Some(_), Some(r)) if !r["namespace"].as_str().unwrap_or_default().is_empty() => {
            let why = "may not be specified when dataSourceRef.namespace is specified";
            invalid(causes, "spec".into(), "\"spec.dataSource\"".into(), why)
        }
        (Some(s), Some(r)) if ["apiGroup", "kind", "name"].iter().any(|f| s[*f].as_str() != r[*f].as_str()) => {
            invalid(causes, "spec".into(), "\"spec.dataSource\"".into(), "must match dataSourceRef")
        }
        _ => {}
    }
    for field in ["dataSource", "dataSourceRef"] {
        let Some(source) = spec.get(field).filter(|s| s.is_object()) else { continue };
        for part in ["name", "kind"] {
            if source[part].as_str().unwrap_or_default().is_empty() {
                required(causes, format!("spec.{field}.{part}"));
            }
        }
        let kind = source["kind"].as_str().unwrap_or_default();
        match source["apiGroup"].as_str().unwrap_or_default() {
            "" if !kind.is_empty() && kind != "PersistentVolumeClaim" => {
                let why = "must be 'PersistentVolumeClaim' when referencing the default apiGroup";
                invalid(causes, format!("spec.{field}"), format!("{kind:?}"), why);
            }
            "" => {}
            group => {
                for why in meta::dns1123_subdomain_errors(group) {
                    invalid(causes, format!("spec.{field}.apiGroup"), format!("{group:?}"), &why);
                }
            }
        }
    }
}

/// The sources a volume may have, in the order kube looks at them, with the names its errors use.
pub(super) const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// A PersistentVolume's spec on create (kube's `ValidatePersistentVolumeSpec`; its sources' and node
/// affinity's fields are checked where they are).
pub(super) fn volume(spec: &Value, causes: &mut Vec<Cause>) {
    access_modes(spec, "", causes);
    match spec["capacity"].as_object().filter(|c| !c.is_empty()) {
        None => required(causes, "spec.capacity".into()),
        Some(capacity) => {
            if capacity.len() > 1 || !capacity.contains_key("storage") {
                not_supported(causes, "spec.capacity".into(), &Value::Object(capacity.clone()), &["storage"]);
            }
            for (name, q) in capacity {
                let zero = Value::String("0".into());
                if crate::registry::quantity::compare(q, &zero).is_some_and(|o| o.is_le()) {
                    let text = q.as_str().map_or_else(|| q.to_string(), str::to_string);
                    invalid(causes, format!("spec.capacity[{name}]"), format!("{text:?}"), "must be greater than zero");
                }
            }
        }
    }
    if let Some(map) = spec.as_object() {
        if spec["persistentVolumeReclaimPolicy"].as_str().is_some_and(|p| !p.is_empty()) {
            one_of_at(map, "persistentVolumeReclaimPolicy", "spec", &["Delete", "Recycle", "Retain"], causes);
        }
    }
    let sources: Vec<&str> =
        VOLUME_SOURCES.iter().copied().filter(|s| spec.get(*s).is_some_and(|v| !v.is_null())).collect();
    match sources.as_slice() {
        [] => push(causes, cause("FieldValueRequired", "spec", "Required value: must specify a volume type")),
        [_, extra @ ..] => {
            // kube never names a FlexVolume as the one too many.
            for source in extra.iter().filter(|s| **s != "flexVolume") {
                let at = if *source == "cephfs" { "spec.cephFS".to_string() } else { format!("spec.{source}") };
                forbidden(causes, &at, "may not specify more than 1 volume type");
            }
        }
    }
    if spec.get("local").is_some_and(|l| !l.is_null()) && spec.get("nodeAffinity").is_none_or(Value::is_null) {
        push(
            causes,
            cause("FieldValueRequired", "spec.nodeAffinity", "Required value: Local volume requires node affinity"),
        );
    }
    if let Some(affinity) = spec.get("nodeAffinity").filter(|a| a.is_object()) {
        if affinity.get("required").is_none_or(Value::is_null) {
            let why = "Required value: must specify required node constraints";
            push(causes, cause("FieldValueRequired", "spec.nodeAffinity.required", why));
        }
    }
    let root = |p: &str| p.starts_with('/') && p.split('/').all(|s| s.is_empty() || s == ".");
    if spec["hostPath"]["path"].as_str().is_some_and(root) && spec["persistentVolumeReclaimPolicy"] == "Recycle" {
        forbidden(causes, "spec.persistentVolumeReclaimPolicy", "may not be 'recycle' for a hostPath mount of '/'");
    }
    class_and_mode(spec, causes);
}

/// A path that must not step out of where it is (kube's `validatePathNoBacksteps`).
fn no_backsteps(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let p = map.get("path").and_then(Value::as_str).unwrap_or_default();
    if p.is_empty() {
        return required(causes, path.child("path"));
    }
    if p.split('/').any(|s| s == "..") {
        invalid(causes, path.child("path"), format!("{p:?}"), "must not contain '..'");
    }
}

/// A host path, a pod's or a volume's (kube's `validateHostPathVolumeSource`): a path without `..`,
/// and a known type.
pub(super) fn host_path(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    no_backsteps(map, path, causes);
    const TYPES: &[&str] =
        &["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"];
    if let Some(t) = map.get("type").filter(|t| !t.is_null()) {
        if !t.as_str().is_some_and(|t| TYPES.contains(&t)) {
            not_supported(causes, path.child("type"), t, TYPES);
        }
    }
}

/// A local volume's path (kube's `validateLocalVolumeSource`).
pub(super) fn local(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    no_backsteps(map, path, causes);
}

/// An NFS export (kube's `validateNFSVolumeSource`): a server and an absolute path.
pub(super) fn nfs(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("server")) {
        required(causes, path.child("server"));
    }
    match map.get("path").and_then(Value::as_str).unwrap_or_default() {
        "" => required(causes, path.child("path")),
        p if !p.starts_with('/') => invalid(causes, path.child("path"), format!("{p:?}"), "must be an absolute path"),
        _ => {}
    }
}

/// A volume's CSI source (kube's `validateCSIPersistentVolumeSource`): a driver, a volume handle, and
/// secrets named in a namespace.
pub(super) fn csi_volume_source(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    csi_driver_name(causes, path.child("driver"), map.get("driver").and_then(Value::as_str).unwrap_or_default());
    if is_empty(map.get("volumeHandle")) {
        required(causes, path.child("volumeHandle"));
    }
    for secret in
        ["controllerPublishSecretRef", "controllerExpandSecretRef", "nodePublishSecretRef", "nodeExpandSecretRef"]
    {
        let Some(reference) = map.get(secret).filter(|s| s.is_object()) else { continue };
        let at = path.child(secret);
        match reference["name"].as_str().unwrap_or_default() {
            "" => required(causes, format!("{at}.name")),
            name => {
                for why in meta::dns1123_subdomain_errors(name) {
                    invalid(causes, format!("{at}.name"), format!("{name:?}"), &why);
                }
            }
        }
        match reference["namespace"].as_str().unwrap_or_default() {
            "" => required(causes, format!("{at}.namespace")),
            ns => dns_label(causes, format!("{at}.namespace"), ns),
        }
    }
}

/// A StorageClass (kube's `ValidateStorageClass`): a provisioner, at most 512 parameters of 256 KiB
/// in all with no empty key, known reclaim policy and binding mode, allowed topologies without
/// repeats.
pub(super) fn storage_class(obj: &Value, causes: &mut Vec<Cause>) {
    match obj["provisioner"].as_str().unwrap_or_default() {
        "" => required(causes, "provisioner".into()),
        p => {
            let lower = p.to_ascii_lowercase();
            for why in meta::qualified_name_errors(&lower) {
                invalid(causes, "provisioner".into(), format!("{lower:?}"), &why);
            }
        }
    }
    if let Some(parameters) = obj["parameters"].as_object() {
        if parameters.len() > 512 {
            push(causes, cause("FieldValueTooLong", "parameters", "Too long: may not be more than 512 bytes"));
        } else {
            if parameters.contains_key("") {
                invalid(causes, "parameters".into(), "\"\"".into(), "field can not be empty.");
            }
            let size: usize = parameters.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
            if size > 256 * 1024 {
                push(causes, cause("FieldValueTooLong", "parameters", "Too long: may not be more than 262144 bytes"));
            }
        }
    }
    if let Some(map) = obj.as_object() {
        if obj["reclaimPolicy"].as_str().is_some_and(|p| !p.is_empty()) {
            one_of_at(map, "reclaimPolicy", "", &["Delete", "Retain"], causes);
        }
        one_of_at(map, "volumeBindingMode", "", &["Immediate", "WaitForFirstConsumer"], causes);
    }
    for (i, term) in obj["allowedTopologies"].as_array().into_iter().flatten().enumerate() {
        let mut keys = HashSet::new();
        for (j, e) in term["matchLabelExpressions"].as_array().into_iter().flatten().enumerate() {
            let at = format!("allowedTopologies[{i}].matchLabelExpressions[{j}]");
            let key = e["key"].as_str().unwrap_or_default();
            label_key(causes, &format!("{at}.key"), key);
            if !keys.insert(key) {
                duplicate(causes, &format!("{at}.key"), key);
            }
            let values = e["values"].as_array().map_or(&[][..], Vec::as_slice);
            if values.is_empty() {
                required(causes, format!("{at}.values"));
            }
            let mut seen = HashSet::new();
            for (n, v) in values.iter().enumerate() {
                let v = v.as_str().unwrap_or_default();
                if !seen.insert(v) {
                    duplicate(causes, &format!("{at}.values[{n}]"), v);
                }
            }
        }
    }
}
