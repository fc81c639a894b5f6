//! A volume's source as kube checks it, each kind by its own fields (kube's `validate*VolumeSource`
//! in `pkg/apis/core/validation`): the in-tree network and cloud disks (still stored, though kubelets
//! no longer mount most of them), git repositories, empty directories, generic ephemeral claims, the
//! downward API's files and projections, the field and resource selectors those files share with
//! environment variables, and what a container's mounts and devices may ask of its volumes.

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;

use super::*;

/// kube's words for a disk partition out of range (it accepts 0 all the same).
const PARTITION: &str = "must be between 1 and 255, inclusive";
const LUN: &str = "must be between 0 and 255, inclusive";
const FILE_MODE: &str = "must be a number between 0 and 0777 (octal), both inclusive";
const ISCSI_NAME_TOO_LONG: &str = "Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.";

/// The field paths a downward API file may name (kube's `validVolumeDownwardAPIFieldPathExpressions`),
/// sorted as kube lists a set.
const FILE_FIELDS: &[&str] =
    &["metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid"];

/// The field paths an environment variable may name (kube's `validEnvDownwardAPIFieldPathExpressions`).
const ENV_FIELDS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// The container resources a selector may name, besides hugepages (kube's
/// `validContainerResourceFieldPathExpressions`).
const RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// The metadata a claim template may set (kube's `allowedTemplateObjectMetaFields`); the others are
/// listed in `ObjectMeta`'s Go order, with the names kube reports them by (its Go field's name with a
/// lower first letter).
const TEMPLATE_META_FORBIDDEN: &[(&str, &str)] = &[
    ("name", "name"),
    ("generateName", "generateName"),
    ("namespace", "namespace"),
    ("selfLink", "selfLink"),
    ("uid", "uID"),
    ("resourceVersion", "resourceVersion"),
    ("generation", "generation"),
    ("creationTimestamp", "creationTimestamp"),
    ("deletionTimestamp", "deletionTimestamp"),
    ("deletionGracePeriodSeconds", "deletionGracePeriodSeconds"),
    ("ownerReferences", "ownerReferences"),
    ("finalizers", "finalizers"),
    ("managedFields", "managedFields"),
];

// kube's `iscsiInitiator*Regex`, in Rust's syntax: ASCII classes where Go's are ASCII.
static IQN: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"iqn\.[0-9]{4}-[0-9]{2}\.([[:alnum:]\-.]+)(:[^,;*&$|\t\n\f\r ]+)$").unwrap());
static EUI: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^eui.[[:alnum:]]{16}$").unwrap());
static NAA: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^naa.[[:alnum:]]{32}$").unwrap());

fn string<'a>(map: &'a Map<String, Value>, field: &str) -> &'a str {
    map.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// Whether a pointer field is set: present and not null, as Go decodes it.
fn set(map: &Map<String, Value>, field: &str) -> bool {
    map.get(field).is_some_and(|v| !v.is_null())
}

/// Go's `%q` of a value shown in many causes, cut once: a check that reports it per item of a list
/// must not copy a megabyte per cause (`push` cuts each message, but only after it is made).
fn shown_once(s: &str) -> String {
    let mut out = format!("{s:?}");
    cut(&mut out);
    out
}

/// The checks of an in-tree source's own fields, keyed by its struct's name; nothing for others.
pub(super) fn source(name: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let Some(kind) = name.strip_prefix("core.v1.") else { return };
    // kube reports a GCE disk's fields under the name the field had before it was renamed.
    let base = if kind == "GCEPersistentDiskVolumeSource" { path.sibling("persistentDisk") } else { path.render() };
    let at = |field: &str| format!("{base}.{field}");
    let need = |fields: &[&str], causes: &mut Vec<Cause>| {
        for field in fields.iter().filter(|f| is_empty(map.get(**f))) {
            required(causes, at(field));
        }
    };
    let persistent = kind.ends_with("PersistentVolumeSource");
    match kind {
        "GCEPersistentDiskVolumeSource" | "AWSElasticBlockStoreVolumeSource" => {
            need(if kind.starts_with("GCE") { &["pdName"] } else { &["volumeID"] }, causes);
            if let Some(p) = map.get("partition").and_then(Value::as_i64).filter(|p| !(0..=255).contains(p)) {
                invalid(causes, at("partition"), p.to_string(), PARTITION);
            }
        }
        "GitRepoVolumeSource" => {
            need(&["repository"], causes);
            descending(string(map, "directory"), &at("directory"), causes);
        }
        "ISCSIVolumeSource" | "ISCSIPersistentVolumeSource" => iscsi(map, persistent, &at, causes),
        "FCVolumeSource" => fibre_channel(map, &at, causes),
        "GlusterfsVolumeSource" => need(&["endpoints", "path"], causes),
        "GlusterfsPersistentVolumeSource" => {
            need(&["endpoints", "path"], causes);
            match map.get("endpointsNamespace").and_then(Value::as_str) {
                Some("") => {
                    let why = "if the endpointnamespace is set, it must be a valid namespace name";
                    invalid(causes, at("endpointsNamespace"), "\"\"".into(), why);
                }
                Some(ns) => dns_label(causes, at("endpointsNamespace"), ns),
                None => {}
            }
        }
        "FlockerVolumeSource" => {
            let (name, uuid) = (string(map, "datasetName"), string(map, "datasetUUID"));
            if name.is_empty() && uuid.is_empty() {
                required_why(causes, &base, "one of datasetName and datasetUUID is required");
            }
            if !name.is_empty() && !uuid.is_empty() {
                let why = "datasetName and datasetUUID can not be specified simultaneously";
                invalid(causes, base.clone(), "\"resource\"".into(), why);
            }
            if name.contains('/') {
                invalid(causes, at("datasetName"), format!("{name:?}"), "must not contain '/'");
            }
        }
        "RBDVolumeSource" | "RBDPersistentVolumeSource" => need(&["monitors", "image"], causes),
        "CinderVolumeSource" | "CinderPersistentVolumeSource" => {
            need(&["volumeID"], causes);
            secret_reference(map, persistent, &at("secretRef"), causes);
        }
        "CephFSVolumeSource" | "CephFSPersistentVolumeSource" => need(&["monitors"], causes),
        "FlexVolumeSource" | "FlexPersistentVolumeSource" => {
            need(&["driver"], causes);
            for key in map.get("options").and_then(Value::as_object).into_iter().flat_map(|o| o.keys()) {
                let namespace = key.split_once('/').map_or(key.as_str(), |(ns, _)| ns);
                let normalized = format!(".{}", namespace.to_lowercase());
                if normalized.ends_with(".kubernetes.io") || normalized.ends_with(".k8s.io") {
                    let why = "kubernetes.io and k8s.io namespaces are reserved";
                    invalid(causes, format!("{}[{key}]", at("options")), format!("{key:?}"), why);
                }
            }
        }
        "AzureFileVolumeSource" => need(&["secretName", "shareName"], causes),
        "AzureFilePersistentVolumeSource" => {
            need(&["secretName", "shareName"], causes);
            if map.get("secretNamespace").and_then(Value::as_str) == Some("") {
                required(causes, at("secretNamespace"));
            }
        }
        "AzureDiskVolumeSource" => azure_disk(map, &at, causes),
        "VsphereVirtualDiskVolumeSource" => need(&["volumePath"], causes),
        "PhotonPersistentDiskVolumeSource" => need(&["pdID"], causes),
        "PortworxVolumeSource" => need(&["volumeID"], causes),
        "ScaleIOVolumeSource" | "ScaleIOPersistentVolumeSource" => need(&["gateway", "system", "volumeName"], causes),
        "StorageOSVolumeSource" | "StorageOSPersistentVolumeSource" => {
            match string(map, "volumeName") {
                "" => required(causes, at("volumeName")),
                name => dns_label(causes, at("volumeName"), name),
            }
            if let Some(ns) = map.get("volumeNamespace").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                dns_label(causes, at("volumeNamespace"), ns);
            }
            secret_reference(map, persistent, &at("secretRef"), causes);
        }
        "QuobyteVolumeSource" => quobyte(map, &at, causes),
        "EmptyDirVolumeSource" => {
            let size = map.get("sizeLimit").filter(|q| !q.is_null());
            if size.and_then(crate::registry::quantity::value).is_some_and(|v| v < 0.0) {
                forbidden(causes, &at("sizeLimit"), "SizeLimit field must be a valid resource quantity");
            }
        }
        "EphemeralVolumeSource" => ephemeral(map, &at, causes),
        "DownwardAPIVolumeSource" => {
            downward_files(map.get("items").and_then(Value::as_array), &base, None, &base, causes)
        }
        "ProjectedVolumeSource" => projections(map, &base, causes),
        "EnvVarSource" => env_source(map, path, causes),
        _ => {}
    }
}

/// A secret a source names: a name (a volume's in-tree source names its namespace too).
fn secret_reference(map: &Map<String, Value>, persistent: bool, at: &str, causes: &mut Vec<Cause>) {
    let Some(secret) = map.get("secretRef").filter(|s| !s.is_null()) else { return };
    let fields: &[&str] = if persistent { &["name", "namespace"] } else { &["name"] };
    for field in fields.iter().filter(|f| text(secret, f).is_empty()) {
        required(causes, format!("{at}.{field}"));
    }
}

/// An iSCSI target (kube's `validateISCSIVolumeSource` and `validateISCSIPersistentVolumeSource`,
/// whose words differ for an initiator of no known form).
fn iscsi(map: &Map<String, Value>, persistent: bool, at: &dyn Fn(&str) -> String, causes: &mut Vec<Cause>) {
    if string(map, "targetPortal").is_empty() {
        required(causes, at("targetPortal"));
    }
    let unknown_form =
        if persistent { "must be valid format" } else { "must be valid format starting with iqn, eui, or naa" };
    let known = |name: &str| ["iqn", "eui", "naa"].iter().any(|p| name.starts_with(p));
    let well_formed = |name: &str| {
        (name.starts_with("iqn") && IQN.is_match(name))
            || (name.starts_with("eui") && EUI.is_match(name))
            || (name.starts_with("naa") && NAA.is_match(name))
    };
    match string(map, "iqn") {
        "" => required(causes, at("iqn")),
        iqn if !known(iqn) => {
            // The persistent source's words are the same for both failures.
            let why = if persistent { "must be valid format" } else { unknown_form };
            invalid(causes, at("iqn"), format!("{iqn:?}"), why);
        }
        iqn if !well_formed(iqn) => invalid(causes, at("iqn"), format!("{iqn:?}"), "must be valid format"),
        _ => {}
    }
    if let Some(lun) = map.get("lun").and_then(Value::as_i64).filter(|l| !(0..=255).contains(l)) {
        invalid(causes, at("lun"), lun.to_string(), LUN);
    }
    let chap = |f: &str| map.get(f) == Some(&Value::Bool(true));
    if (chap("chapAuthDiscovery") || chap("chapAuthSession")) && !set(map, "secretRef") {
        required(causes, at("secretRef"));
    }
    if persistent && set(map, "secretRef") && text(&map["secretRef"], "name").is_empty() {
        required(causes, format!("{}.name", at("secretRef")));
    }
    if let Some(initiator) = map.get("initiatorName").and_then(Value::as_str) {
        // kube's path is lower case here.
        if !known(initiator) {
            invalid(causes, at("initiatorname"), format!("{initiator:?}"), unknown_form);
        }
        if known(initiator) && !well_formed(initiator) {
            invalid(causes, at("initiatorname"), format!("{initiator:?}"), "must be valid format");
        }
    }
}

/// An iSCSI volume's name and target, which together name its initiator (kube checks their length
/// where it knows the name: the pod's volume, or the PersistentVolume).
pub(super) fn iscsi_name(name: &str, source: &Value, at: String, shown: &str, causes: &mut Vec<Cause>) {
    let portal = text(source, "targetPortal");
    if source.get("initiatorName").is_some_and(|i| !i.is_null()) && name.len() + 1 + portal.len() > 64 {
        invalid(causes, at, format!("{shown:?}"), ISCSI_NAME_TOO_LONG);
    }
}

/// A Fibre Channel target: world wide names with a LUN, or world wide identifiers.
fn fibre_channel(map: &Map<String, Value>, at: &dyn Fn(&str) -> String, causes: &mut Vec<Cause>) {
    let wwns = map.get("targetWWNs").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    let wwids = map.get("wwids").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if wwns.is_empty() && wwids.is_empty() {
        required_why(causes, &at("targetWWNs"), "must specify either targetWWNs or wwids, but not both");
    }
    if !wwns.is_empty() && !wwids.is_empty() {
        let why = "targetWWNs and wwids can not be specified simultaneously";
        invalid(causes, at("targetWWNs"), go_strings("string", wwns), why);
    }
    if !wwns.is_empty() {
        match map.get("lun").filter(|l| !l.is_null()).and_then(Value::as_i64) {
            None => required_why(causes, &at("lun"), "lun is required if targetWWNs is specified"),
            Some(lun) if !(0..=255).contains(&lun) => invalid(causes, at("lun"), lun.to_string(), LUN),
            Some(_) => {}
        }
    }
}

/// An Azure data disk: a name and URI, known caching mode and kind, and a URI of the kind's form.
fn azure_disk(map: &Map<String, Value>, at: &dyn Fn(&str) -> String, causes: &mut Vec<Cause>) {
    for field in ["diskName", "diskURI"] {
        if string(map, field).is_empty() {
            required(causes, at(field));
        }
    }
    const CACHING: &[&str] = &["None", "ReadOnly", "ReadWrite"];
    const KINDS: &[&str] = &["Dedicated", "Managed", "Shared"];
    for (field, supported) in [("cachingMode", CACHING), ("kind", KINDS)] {
        if let Some(v) = map.get(field).filter(|v| !v.is_null()) {
            if !v.as_str().is_some_and(|s| supported.contains(&s)) {
                not_supported(causes, at(field), v, supported);
            }
        }
    }
    let uri = string(map, "diskURI");
    let Some(kind) = map.get("kind").and_then(Value::as_str) else { return };
    if kind == "Managed" && !uri.starts_with("/subscriptions/") {
        let form = "/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/{disk-id}";
        not_supported(causes, at("diskURI"), &Value::String(uri.into()), &[form]);
    }
    if kind != "Managed" && !uri.starts_with("https://") {
        let form = "https://{account-name}.blob.core.windows.net/{container-name}/{disk-name}.vhd";
        not_supported(causes, at("diskURI"), &Value::String(uri.into()), &[form]);
    }
}

/// A Quobyte volume: a registry of `host:port` pairs (each as Go's `net.SplitHostPort` reads it), a
/// tenant of at most 64 characters, a volume.
fn quobyte(map: &Map<String, Value>, at: &dyn Fn(&str) -> String, causes: &mut Vec<Cause>) {
    const PAIRS: &str = "must be a host:port pair or multiple pairs separated by commas";
    let registry = string(map, "registry");
    if registry.is_empty() {
        required_why(causes, &at("registry"), PAIRS);
    } else if string(map, "tenant").len() >= 65 {
        required_why(causes, &at("tenant"), "must be a UUID and may not exceed a length of 64 characters");
    } else {
        let bad = registry.split(',').filter(|p| !splits_host_port(p)).count();
        let shown = if bad > 0 { shown_once(registry) } else { String::new() };
        // One cause per bad pair, as kube gives; `invalid` stops adding at `MAX_CAUSES`.
        for _ in 0..bad.min(MAX_CAUSES) {
            invalid(causes, at("registry"), shown.clone(), PAIRS);
        }
    }
    if string(map, "volume").is_empty() {
        required(causes, at("volume"));
    }
}

/// Whether Go's `net.SplitHostPort` takes `s`: a last colon before the port, a bracketed host if the
/// host has colons, and brackets nowhere else.
fn splits_host_port(s: &str) -> bool {
    let Some(colon) = s.rfind(':') else { return false };
    let (host_from, port_from) = if s.starts_with('[') {
        let Some(end) = s.find(']') else { return false };
        if end + 1 != colon {
            return false;
        }
        (1, end + 1)
    } else {
        if s[..colon].contains(':') {
            return false;
        }
        (0, 0)
    };
    !s[host_from..].contains('[') && !s[port_from..].contains(']')
}

/// A generic ephemeral volume: a claim template whose metadata holds labels and annotations only and
/// whose spec is a claim's.
fn ephemeral(map: &Map<String, Value>, at: &dyn Fn(&str) -> String, causes: &mut Vec<Cause>) {
    let Some(template) = map.get("volumeClaimTemplate").filter(|t| !t.is_null()) else {
        return required(causes, at("volumeClaimTemplate"));
    };
    let at = at("volumeClaimTemplate");
    if let Some(meta) = template.get("metadata").and_then(Value::as_object) {
        let (labels, annotations) = (format!("{at}.metadata.labels"), format!("{at}.metadata.annotations"));
        // kube checks annotations before labels here.
        let mut found = meta::labels_annotations_errors(meta, &labels, &annotations);
        found.sort_by_key(|c| c.field != annotations);
        for c in found {
            push(causes, c);
        }
        for (field, name) in TEMPLATE_META_FORBIDDEN {
            // Set as Go sees it: not its zero value (an empty list is set, as Go decodes `[]`; a
            // pointer is set whatever it points to).
            let pointer = matches!(*field, "deletionGracePeriodSeconds" | "deletionTimestamp");
            let zero = |v: &Value| v.is_null() || !pointer && (v == &Value::Bool(false) || v == "" || v == 0);
            if meta.get(*field).is_some_and(|v| !zero(v)) {
                forbidden(causes, &format!("{at}.metadata.{name}"), "cannot be set");
            }
        }
    }
    under(&at, causes, |c| claim(&template["spec"], c));
}

/// A pod's generic ephemeral volumes against its name (kube's `ValidateVolumes` with the pod's
/// metadata): the claim each makes is named `<pod>-<volume>`, which must be a valid name, and no
/// other volume may name that claim.
pub(super) fn ephemeral_claims(pod: &Map<String, Value>, causes: &mut Vec<Cause>) {
    let name = pod.get("metadata").map(|m| text(m, "name")).unwrap_or_default();
    let volumes = pod.get("spec").and_then(|s| s.get("volumes")).and_then(Value::as_array);
    let volumes = volumes.map_or(&[][..], Vec::as_slice);
    if name.is_empty() {
        return;
    }
    let mut created = HashSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let volume_name = text(volume, "name");
        if volume.get("ephemeral").is_none_or(Value::is_null) {
            continue;
        }
        let claim = format!("{name}-{volume_name}");
        if !volume_name.is_empty() {
            for why in meta::dns1123_subdomain_errors(&claim) {
                let why = format!("PVC name {claim:?}: {why}");
                invalid(causes, format!("spec.volumes[{i}].name"), format!("{volume_name:?}"), &why);
            }
        }
        created.insert(claim);
    }
    for (i, volume) in volumes.iter().enumerate() {
        let claim = volume.get("persistentVolumeClaim").map(|c| text(c, "claimName")).unwrap_or_default();
        if created.contains(claim) {
            let at = format!("spec.volumes[{i}].persistentVolumeClaim.claimName");
            invalid(
                causes,
                at,
                format!("{claim:?}"),
                "must not reference a PVC that gets created for an ephemeral volume",
            );
        }
    }
}

/// A path that must stay below where it is put (kube's `validateLocalDescendingPath`): relative, with
/// no `..` step.
fn descending(p: &str, at: &str, causes: &mut Vec<Cause>) {
    if p.starts_with('/') {
        invalid(causes, at.into(), format!("{p:?}"), "must be a relative path");
    }
    if p.split('/').any(|s| s == "..") {
        invalid(causes, at.into(), format!("{p:?}"), "must not contain '..'");
    }
}

/// A projected file's path (kube's `ValidateLocalNonReservedPath`): descending, and not starting with
/// `..`, which names the kubelet's own files.
pub(super) fn non_reserved(p: &str, at: &str, causes: &mut Vec<Cause>) {
    descending(p, at, causes);
    if p.starts_with("..") && !p.starts_with("../") {
        invalid(causes, at.into(), format!("{p:?}"), "must not start with '..'");
    }
}

/// The downward API's files (kube's `validateDownwardAPIVolumeFile`), which kube reports at the
/// source's path (`at`), not at each item's; `paths` gathers the files' paths of a projection, where a
/// path taken twice is reported at the projection (`projected`).
fn downward_files(
    items: Option<&Vec<Value>>,
    at: &str,
    mut paths: Option<&mut HashSet<String>>,
    projected: &str,
    causes: &mut Vec<Cause>,
) {
    for file in items.into_iter().flatten() {
        let p = text(file, "path");
        if p.is_empty() {
            required(causes, format!("{at}.path"));
        }
        non_reserved(p, &format!("{at}.path"), causes);
        let field_ref = file.get("fieldRef").filter(|f| !f.is_null());
        let resource_ref = file.get("resourceFieldRef").filter(|f| !f.is_null());
        match (field_ref, resource_ref) {
            (Some(f), resource) => {
                object_field(f, FILE_FIELDS, &format!("{at}.fieldRef"), causes);
                if resource.is_some() {
                    let why = "fieldRef and resourceFieldRef can not be specified simultaneously";
                    invalid(causes, at.into(), "\"resource\"".into(), why);
                }
            }
            (None, Some(r)) => resource_field(r, &format!("{at}.resourceFieldRef"), true, causes),
            (None, None) => required_why(causes, at, "one of fieldRef and resourceFieldRef is required"),
        }
        if let Some(mode) = file.get("mode").and_then(Value::as_i64).filter(|m| !(0..=0o777).contains(m)) {
            invalid(causes, format!("{at}.mode"), mode.to_string(), FILE_MODE);
        }
        if let (Some(paths), false) = (paths.as_deref_mut(), p.is_empty()) {
            if !paths.insert(p.to_string()) {
                invalid(causes, projected.into(), format!("{p:?}"), "conflicting duplicate paths");
            }
        }
    }
}

/// A projected volume's sources (kube's `validateProjectionSources`): one kind each, names where a
/// kind needs one, no file path twice, tokens of 10 minutes to 2^32 seconds at a relative path.
fn projections(map: &Map<String, Value>, at: &str, causes: &mut Vec<Cause>) {
    let mut paths = HashSet::new();
    let sources = map.get("sources").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    for (i, source) in sources.iter().enumerate() {
        let here = format!("{at}.sources[{i}]");
        let mut kinds = 0;
        for kind in ["secret", "configMap"] {
            let Some(projection) = source.get(kind).filter(|p| !p.is_null()) else { continue };
            kinds += 1;
            let name = text(projection, "name");
            if name.is_empty() {
                required(causes, format!("{here}.{kind}.name"));
            }
            // Each item's own fields are checked where it is (`KeyToPath`); the name a duplicate is
            // reported with is shown once, however many items repeat a path.
            let mut shown = None;
            for item in list(projection, "items") {
                let p = text(item, "path");
                if !p.is_empty() && !paths.insert(p.to_string()) {
                    let shown = shown.get_or_insert_with(|| shown_once(name)).clone();
                    invalid(causes, at.into(), shown, "conflicting duplicate paths");
                }
            }
        }
        if let Some(downward) = source.get("downwardAPI").filter(|d| !d.is_null()) {
            kinds += 1;
            let items = downward.get("items").and_then(Value::as_array);
            downward_files(items, &format!("{here}.downwardAPI"), Some(&mut paths), at, causes);
        }
        if let Some(token) = source.get("serviceAccountToken").filter(|t| !t.is_null()) {
            kinds += 1;
            let seconds = token["expirationSeconds"].as_i64().unwrap_or(0);
            let expiration = format!("{here}.serviceAccountToken.expirationSeconds");
            if seconds < 600 {
                let why = "may not specify a duration less than 10 minutes";
                invalid(causes, expiration.clone(), seconds.to_string(), why);
            }
            if seconds > 1 << 32 {
                invalid(causes, expiration, seconds.to_string(), "may not specify a duration larger than 2^32 seconds");
            }
            // kube reports the token's path at the projected volume's.
            match text(token, "path") {
                "" => required(causes, format!("{at}.path")),
                p => non_reserved(p, &format!("{at}.path"), causes),
            }
        }
        if source.get("clusterTrustBundle").is_some_and(|b| !b.is_null()) {
            kinds += 1;
        }
        if kinds > 1 {
            forbidden(causes, &here, "may not specify more than 1 volume type per source");
        }
    }
}

/// An environment variable's source's selectors (kube's `validateEnvVarValueFrom`; how many sources
/// it names is checked with the variable).
fn env_source(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(f) = map.get("fieldRef").filter(|f| !f.is_null()) {
        object_field(f, ENV_FIELDS, &path.child("fieldRef"), causes);
    }
    if let Some(r) = map.get("resourceFieldRef").filter(|r| !r.is_null()) {
        resource_field(r, &path.child("resourceFieldRef"), false, causes);
    }
    for reference in ["configMapKeyRef", "secretKeyRef"] {
        let Some(selector) = map.get(reference).filter(|s| !s.is_null()) else { continue };
        let at = path.child(reference);
        let name = text(selector, "name");
        for why in meta::dns1123_subdomain_errors(name) {
            invalid(causes, format!("{at}.name"), format!("{name:?}"), &why);
        }
        match text(selector, "key") {
            "" => required(causes, format!("{at}.key")),
            key => {
                for why in config_key_problems(key) {
                    invalid(causes, format!("{at}.key"), format!("{key:?}"), why);
                }
            }
        }
    }
}

/// A field of the pod a file or variable shows (kube's `validateObjectFieldSelector`): one kube
/// converts from v1, and among `expressions` unless it is a label's or an annotation's.
fn object_field(selector: &Value, expressions: &[&str], at: &str, causes: &mut Vec<Cause>) {
    // Defaults make an empty version v1 before kube validates (kgate's may stop at their budget).
    let version = Some(text(selector, "apiVersion")).filter(|v| !v.is_empty()).unwrap_or("v1");
    let label = text(selector, "fieldPath");
    if label.is_empty() {
        return required(causes, format!("{at}.fieldPath"));
    }
    let internal = match downward_field(version, label) {
        Ok(internal) => internal,
        Err(e) => {
            let why = format!("error converting fieldPath: {e}");
            return invalid(causes, format!("{at}.fieldPath"), format!("{label:?}"), &why);
        }
    };
    match subscripted(internal) {
        Some(("metadata.annotations", key)) => {
            let key = key.to_lowercase();
            for why in meta::qualified_name_errors(&key) {
                invalid(causes, at.into(), format!("{key:?}"), &why);
            }
        }
        Some(("metadata.labels", key)) => {
            for why in meta::qualified_name_errors(key) {
                invalid(causes, at.into(), format!("{key:?}"), &why);
            }
        }
        Some((other, _)) => invalid(causes, at.into(), format!("{other:?}"), "does not support subscript"),
        None if !expressions.contains(&internal) => {
            not_supported(causes, format!("{at}.fieldPath"), &Value::String(internal.into()), expressions)
        }
        None => {}
    }
}

/// A field label of a v1 pod as kube converts it (`ConvertDownwardAPIFieldLabel`), or its words
/// for one it does not know.
fn downward_field<'a>(version: &str, label: &'a str) -> Result<&'a str, String> {
    if version != "v1" {
        return Err(format!("unsupported pod version: {version}"));
    }
    if let Some((path, _)) = subscripted(label) {
        return match path {
            "metadata.annotations" | "metadata.labels" => Ok(label),
            _ => Err(format!("field label does not support subscript: {label}")),
        };
    }
    const LABELS: &[&str] = &[
        "metadata.annotations",
        "metadata.labels",
        "metadata.name",
        "metadata.namespace",
        "metadata.uid",
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.serviceAccountName",
        "spec.schedulerName",
        "status.phase",
        "status.hostIP",
        "status.hostIPs",
        "status.podIP",
        "status.podIPs",
    ];
    match label {
        // Old clients' name for the node's.
        "spec.host" => Ok("spec.nodeName"),
        l if LABELS.contains(&l) => Ok(label),
        _ => Err(format!("field label not supported: {label}")),
    }
}

/// `path['key']` split in two (kube's `SplitMaybeSubscriptedPath`).
fn subscripted(label: &str) -> Option<(&str, &str)> {
    let inner = label.strip_suffix("']")?;
    let (path, key) = inner.split_once("['")?;
    (!path.is_empty()).then_some((path, key))
}

/// A container resource a file or variable shows (kube's `validateContainerResourceFieldSelector`):
/// a container for a file, a known resource, a divisor that resource takes.
fn resource_field(selector: &Value, at: &str, file: bool, causes: &mut Vec<Cause>) {
    let resource = text(selector, "resource");
    let hugepages = resource.starts_with("requests.hugepages-") || resource.starts_with("limits.hugepages-");
    if file && text(selector, "containerName").is_empty() {
        required(causes, format!("{at}.containerName"));
    } else if resource.is_empty() {
        required(causes, format!("{at}.resource"));
    } else if !RESOURCE_FIELDS.contains(&resource) && !hugepages {
        not_supported(causes, format!("{at}.resource"), &Value::String(resource.into()), RESOURCE_FIELDS);
    }
    let Some(divisor) = selector.get("divisor").filter(|d| !d.is_null()) else { return };
    let written = divisor.as_str().map_or_else(|| divisor.to_string(), str::to_string);
    let Some(value) = crate::registry::quantity::value(divisor).filter(|v| *v != 0.0) else { return };
    let (cpu, sized) = match resource {
        "limits.cpu" | "requests.cpu" => (true, ""),
        "limits.memory" | "requests.memory" => (false, "memory"),
        "limits.ephemeral-storage" | "requests.ephemeral-storage" => (false, "local ephemeral storage"),
        _ if hugepages => (false, "hugepages"),
        _ => return,
    };
    if cpu && !divides(&written, value, true) {
        let why = "only divisor's values 1m and 1 are supported with the cpu resource";
        invalid(causes, format!("{at}.divisor"), format!("{resource:?}"), why);
    }
    if !cpu && !divides(&written, value, false) {
        let why = format!(
            "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the {sized} resource"
        );
        invalid(causes, format!("{at}.divisor"), format!("{resource:?}"), &why);
    }
}

/// Whether a divisor written `written` (of `value`) reads, as kube writes a quantity back, as one
/// kube takes: `1m` or `1` for CPU, `1` or one unit of a decimal or binary suffix for sizes. A
/// quantity keeps its suffix's kind: `1024` reads back `1024`, not `1Ki`; `1e3` as `1e3`.
fn divides(written: &str, value: f64, cpu: bool) -> bool {
    let suffix = written.trim_start_matches(|c: char| c.is_ascii_digit() || matches!(c, '.' | '+' | '-'));
    let binary = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].contains(&suffix);
    let exponent = suffix.len() > 1 && suffix.starts_with(['e', 'E']);
    // kube writes a binary quantity under 1024 in decimal.
    let decimal = !exponent && (!binary || value < 1024.0);
    if value == 1.0 {
        return true;
    }
    if cpu {
        return decimal && value == 0.001;
    }
    (decimal && (1..=6).any(|k| value == 1000f64.powi(k))) || (binary && (1..=6).any(|k| value == 1024f64.powi(k)))
}

/// A container's mounts beyond their names and paths (kube's `ValidateVolumeMounts`, whose paths
/// here are the mount list's, not each mount's), and its block devices (`ValidateVolumeDevices`).
pub(super) fn mounts_and_devices(
    container: &Value,
    at: &str,
    volumes: &HashMap<&str, &Value>,
    causes: &mut Vec<Cause>,
) {
    let mounts = list(container, "volumeMounts");
    let devices = list(container, "volumeDevices");
    let list_at = format!("{at}.volumeMounts");
    let privileged = container["securityContext"]["privileged"] == Value::Bool(true);
    // Looked up by name and path, once each: a mount is compared with every device, and a device with
    // every mount.
    let device_names: HashSet<&str> = devices.iter().map(|d| text(d, "name")).collect();
    let device_paths: HashSet<&str> = devices.iter().map(|d| text(d, "devicePath")).collect();
    let mount_names: HashSet<&str> = mounts.iter().map(|m| text(m, "name")).collect();
    let mount_paths: HashSet<&str> = mounts.iter().map(|m| text(m, "mountPath")).collect();
    for (m, mount) in mounts.iter().enumerate() {
        let here = format!("{list_at}[{m}]");
        let (name, mount_path) = (text(mount, "name"), text(mount, "mountPath"));
        if device_names.contains(name) {
            invalid(causes, format!("{here}.name"), format!("{name:?}"), "must not already exist in volumeDevices");
        }
        if device_paths.contains(mount_path) {
            let why = "must not already exist as a path in volumeDevices";
            invalid(causes, format!("{here}.mountPath"), format!("{mount_path:?}"), why);
        }
        let (sub_path, expr) = (text(mount, "subPath"), text(mount, "subPathExpr"));
        if !sub_path.is_empty() {
            descending(sub_path, &format!("{list_at}.subPath"), causes);
        }
        if !expr.is_empty() {
            if !sub_path.is_empty() {
                let why = "subPathExpr and subPath are mutually exclusive";
                invalid(causes, format!("{here}.subPathExpr"), format!("{expr:?}"), why);
            }
            descending(expr, &format!("{list_at}.subPathExpr"), causes);
        }
        let propagation = mount.get("mountPropagation").and_then(Value::as_str);
        if let Some(p) = propagation {
            const MODES: &[&str] = &["Bidirectional", "HostToContainer", "None"];
            if !MODES.contains(&p) {
                not_supported(causes, format!("{list_at}.mountPropagation"), &Value::String(p.into()), MODES);
            }
            if p == "Bidirectional" && !privileged {
                let why = "Bidirectional mount propagation is available only to privileged containers";
                forbidden(causes, &format!("{list_at}.mountPropagation"), why);
            }
        }
        let rro = format!("{list_at}.recursiveReadOnly");
        match mount.get("recursiveReadOnly").and_then(Value::as_str) {
            None | Some("Disabled") => {}
            Some("Enabled" | "IfPossible") => {
                if mount.get("readOnly") != Some(&Value::Bool(true)) {
                    forbidden(causes, &rro, "may only be specified when readOnly is true");
                }
                if propagation.is_some_and(|p| p != "None") {
                    forbidden(causes, &rro, "may only be specified when mountPropagation is None or not specified");
                }
            }
            Some(other) => {
                not_supported(causes, rro, &Value::String(other.into()), &["Disabled", "Enabled", "IfPossible"])
            }
        }
    }
    let list_at = format!("{at}.volumeDevices");
    let (mut names, mut paths) = (HashSet::new(), HashSet::new());
    for (d, device) in devices.iter().enumerate() {
        let here = format!("{list_at}[{d}]");
        let (name, device_path) = (text(device, "name"), text(device, "devicePath"));
        if name.is_empty() {
            required(causes, format!("{here}.name"));
        }
        if names.contains(name) {
            invalid(causes, format!("{here}.name"), format!("{name:?}"), "must be unique");
        }
        match volumes.get(name) {
            Some(v)
                if v.get("persistentVolumeClaim").is_none_or(Value::is_null)
                    && v.get("ephemeral").is_none_or(Value::is_null) =>
            {
                let why = "can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode";
                invalid(causes, format!("{here}.name"), format!("{name:?}"), why);
            }
            Some(_) => {}
            None => push(causes, cause("FieldValueNotFound", &format!("{here}.name"), format!("Not found: {name:?}"))),
        }
        if device_path.is_empty() {
            required(causes, format!("{here}.devicePath"));
        }
        if paths.contains(device_path) {
            invalid(causes, format!("{here}.devicePath"), format!("{device_path:?}"), "must be unique");
        }
        if !device_path.is_empty() && device_path.split('/').any(|s| s == "..") {
            let why = "can not contain backsteps ('..')";
            invalid(causes, format!("{here}.devicePath"), format!("{device_path:?}"), why);
        } else {
            paths.insert(device_path);
        }
        if mount_names.contains(name) {
            invalid(causes, format!("{here}.name"), format!("{name:?}"), "must not already exist in volumeMounts");
        }
        if mount_paths.contains(device_path) {
            let why = "must not already exist as a path in volumeMounts";
            invalid(causes, format!("{here}.devicePath"), format!("{device_path:?}"), why);
        }
        if !name.is_empty() {
            names.insert(name);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(kind: &str, obj: Value) -> Vec<String> {
        testing::lines(errors("v1", kind, &obj, None))
    }

    fn pod(volumes: Value, containers: Value) -> Value {
        json!({"metadata": {"name": "web"}, "spec": {"containers": containers, "volumes": volumes}})
    }

    fn one_container() -> Value {
        json!([{"name": "c", "image": "x"}])
    }

    #[test]
    fn in_tree_sources_of_a_pod_are_checked_by_their_own_fields() {
        let volumes = json!([
            {"name": "v0", "gcePersistentDisk": {"partition": 300}},
            {"name": "v1", "awsElasticBlockStore": {"volumeID": "vol", "partition": -1}},
            {"name": "v2", "gitRepo": {"directory": "../up"}},
            {"name": "v3", "iscsi": {"targetPortal": "", "iqn": "iqn.bad", "lun": 300, "chapAuthSession": true,
                "initiatorName": "node"}},
            {"name": "v4", "fc": {"targetWWNs": ["a"], "wwids": ["b"]}},
            {"name": "v5", "flocker": {"datasetName": "a/b", "datasetUUID": "u"}},
            {"name": "v6", "rbd": {"monitors": []}},
            {"name": "v7", "flexVolume": {"driver": "d", "options": {"kubernetes.io/x": "1", "example.com/y": "2"}}},
            {"name": "v8", "azureDisk": {"diskName": "d", "diskURI": "disk", "cachingMode": "Sometimes", "kind": "Managed"}},
            {"name": "v9", "quobyte": {"registry": "a:1,b", "volume": ""}},
            {"name": "v10", "storageos": {"volumeName": "Bad_Name", "secretRef": {}}},
            {"name": "v11", "emptyDir": {"sizeLimit": "-1Gi"}},
            {"name": "v12", "scaleIO": {"system": "s", "secretRef": {"name": "s"}}},
            {"name": "v13", "cinder": {"volumeID": "c", "secretRef": {"name": ""}}},
            {"name": "v14", "azureFile": {"shareName": "s"}},
            {"name": "v15", "glusterfs": {"path": "p"}},
            {"name": "v16", "cephfs": {}},
            {"name": "v17", "vsphereVolume": {}},
            {"name": "v18", "photonPersistentDisk": {}},
            {"name": "v19", "portworxVolume": {}},
        ]);
        let got = messages("Pod", pod(volumes, one_container()));
        let label = meta::validate_dns1123_label("Bad_Name").unwrap_err();
        let want = [
            "spec.volumes[0].persistentDisk.pdName: Required value".to_string(),
            "spec.volumes[0].persistentDisk.partition: Invalid value: 300: must be between 1 and 255, inclusive".into(),
            "spec.volumes[1].awsElasticBlockStore.partition: Invalid value: -1: must be between 1 and 255, inclusive".into(),
            "spec.volumes[2].gitRepo.repository: Required value".into(),
            "spec.volumes[2].gitRepo.directory: Invalid value: \"../up\": must not contain '..'".into(),
            "spec.volumes[3].iscsi.targetPortal: Required value".into(),
            "spec.volumes[3].iscsi.iqn: Invalid value: \"iqn.bad\": must be valid format".into(),
            "spec.volumes[3].iscsi.lun: Invalid value: 300: must be between 0 and 255, inclusive".into(),
            "spec.volumes[3].iscsi.secretRef: Required value".into(),
            "spec.volumes[3].iscsi.initiatorname: Invalid value: \"node\": must be valid format starting with iqn, eui, or naa".into(),
            "spec.volumes[4].fc.targetWWNs: Invalid value: []string{\"a\"}: targetWWNs and wwids can not be specified simultaneously".into(),
            "spec.volumes[4].fc.lun: Required value: lun is required if targetWWNs is specified".into(),
            "spec.volumes[5].flocker: Invalid value: \"resource\": datasetName and datasetUUID can not be specified simultaneously".into(),
            "spec.volumes[5].flocker.datasetName: Invalid value: \"a/b\": must not contain '/'".into(),
            "spec.volumes[6].rbd.monitors: Required value".into(),
            "spec.volumes[6].rbd.image: Required value".into(),
            "spec.volumes[7].flexVolume.options[kubernetes.io/x]: Invalid value: \"kubernetes.io/x\": kubernetes.io and k8s.io namespaces are reserved".into(),
            "spec.volumes[8].azureDisk.cachingMode: Unsupported value: \"Sometimes\": supported values: \"None\", \"ReadOnly\", \"ReadWrite\"".into(),
            "spec.volumes[8].azureDisk.diskURI: Unsupported value: \"disk\": supported values: \"/subscriptions/{sub-id}/resourcegroups/{group-name}/providers/microsoft.compute/disks/{disk-id}\"".into(),
            "spec.volumes[9].quobyte.registry: Invalid value: \"a:1,b\": must be a host:port pair or multiple pairs separated by commas".into(),
            "spec.volumes[9].quobyte.volume: Required value".into(),
            format!("spec.volumes[10].storageos.volumeName: Invalid value: \"Bad_Name\": {label}"),
            "spec.volumes[10].storageos.secretRef.name: Required value".into(),
            "spec.volumes[11].emptyDir.sizeLimit: Forbidden: SizeLimit field must be a valid resource quantity".into(),
            "spec.volumes[12].scaleIO.gateway: Required value".into(),
            "spec.volumes[12].scaleIO.volumeName: Required value".into(),
            "spec.volumes[13].cinder.secretRef.name: Required value".into(),
            "spec.volumes[14].azureFile.secretName: Required value".into(),
            "spec.volumes[15].glusterfs.endpoints: Required value".into(),
            "spec.volumes[16].cephfs.monitors: Required value".into(),
            "spec.volumes[17].vsphereVolume.volumePath: Required value".into(),
            "spec.volumes[18].photonPersistentDisk.pdID: Required value".into(),
            "spec.volumes[19].portworxVolume.volumeID: Required value".into(),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn well_formed_sources_files_and_selectors_pass() {
        let volumes = json!([
            {"name": "a", "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage.disk1",
                "lun": 0, "initiatorName": "eui.02004567A425678D"}},
            {"name": "b", "gcePersistentDisk": {"pdName": "disk", "partition": 0}},
            {"name": "c", "quobyte": {"registry": "[::1]:7861,host:1", "volume": "v"}},
            {"name": "d", "projected": {"sources": [{"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                {"downwardAPI": {"items": [{"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}},
                    {"path": "cpu", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "1m"}}]}},
                {"configMap": {"name": "cm", "items": [{"key": "k", "path": "k"}]}}]}},
            {"name": "e", "fc": {"targetWWNs": ["500a0982991b8dc5"], "lun": 2}},
            {"name": "f", "ephemeral": {"volumeClaimTemplate": {"metadata": {"labels": {"a": "b"}},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}},
        ]);
        let env = json!([
            {"name": "NODE", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.host"}}},
            {"name": "LABEL", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['app']"}}},
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
            {"name": "MEM2", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1000"}}},
            {"name": "CM", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
        ]);
        let containers = json!([{"name": "c", "image": "x", "env": env,
            "volumeMounts": [{"name": "b", "mountPath": "/b", "subPath": "sub", "readOnly": true, "recursiveReadOnly": "IfPossible"}],
            "volumeDevices": [{"name": "f", "devicePath": "/dev/f"}]}]);
        assert_eq!(messages("Pod", pod(volumes, containers)), Vec::<String>::new());
    }

    #[test]
    fn persistent_volumes_check_their_own_source_kinds() {
        let pv = |name: &str, source: Value| {
            let mut spec = json!({"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}});
            spec.as_object_mut().unwrap().extend(source.as_object().unwrap().clone());
            messages("PersistentVolume", json!({"metadata": {"name": name}, "spec": spec}))
        };
        let long = "a".repeat(60);
        let iscsi = json!({"iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": "iqn.2001-04.com.example:storage",
            "initiatorName": "bogus", "secretRef": {}}});
        assert_eq!(
            pv(&long, iscsi),
            [
                "spec.iscsi.targetportal: Invalid value: \"10.0.0.1:3260\": Total length of <volume name>:<iscsi.targetPortal> must be under 64 characters if iscsi.initiatorName is specified.",
                "spec.iscsi.secretRef.name: Required value",
                // The persistent source's words for an initiator of no known form.
                "spec.iscsi.initiatorname: Invalid value: \"bogus\": must be valid format",
            ]
        );
        assert_eq!(
            pv("pv", json!({"cinder": {"volumeID": "v", "secretRef": {"name": "s"}}})),
            ["spec.cinder.secretRef.namespace: Required value"]
        );
        assert_eq!(pv("pv", json!({"gcePersistentDisk": {}})), ["spec.persistentDisk.pdName: Required value"]);
        assert_eq!(
            pv("pv", json!({"glusterfs": {"endpoints": "e", "path": "p", "endpointsNamespace": ""}})),
            ["spec.glusterfs.endpointsNamespace: Invalid value: \"\": if the endpointnamespace is set, it must be a valid namespace name"]
        );
        assert_eq!(
            pv("pv", json!({"azureFile": {"secretName": "s", "shareName": "x", "secretNamespace": ""}})),
            ["spec.azureFile.secretNamespace: Required value"]
        );
        assert_eq!(
            pv("pv", json!({"storageos": {"volumeName": "v", "secretRef": {"name": "s"}}})),
            ["spec.storageos.secretRef.namespace: Required value"]
        );
    }

    #[test]
    fn downward_files_projections_and_variables_as_kube_reports_them() {
        let volumes = json!([
            {"name": "d", "downwardAPI": {"items": [
                {"path": "..data", "fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
                {"path": "b", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels['Bad Key']"},
                    "resourceFieldRef": {"resource": "limits.cpu"}},
                {"path": "c"},
                {"path": "e", "resourceFieldRef": {"resource": "limits.gpu", "containerName": "c"}}]}},
            {"name": "p", "projected": {"sources": [
                {"serviceAccountToken": {"path": "/token", "expirationSeconds": 60}},
                {"secret": {"name": "s", "items": [{"key": "k", "path": "x"}]},
                    "configMap": {"name": "a", "items": [{"key": "k", "path": "x"}]}}]}},
        ]);
        let env = json!([
            {"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "metadata.name"}}},
            {"name": "B", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.phase"}}},
            {"name": "C", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "bad key"}}},
            {"name": "D", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1024"}}},
            {"name": "E", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "2"}}},
        ]);
        let containers = json!([{"name": "c", "image": "x", "env": env}]);
        let got = messages("Pod", pod(volumes, containers));
        let bad_key = meta::qualified_name_errors("Bad Key");
        let key = config_key_problems("bad key");
        let mut want = vec![
            "spec.volumes[0].downwardAPI.path: Invalid value: \"..data\": must not start with '..'".to_string(),
            "spec.volumes[0].downwardAPI.fieldRef.fieldPath: Unsupported value: \"spec.nodeName\": supported values: \"metadata.annotations\", \"metadata.labels\", \"metadata.name\", \"metadata.namespace\", \"metadata.uid\"".into(),
        ];
        want.extend(
            bad_key
                .iter()
                .map(|why| format!("spec.volumes[0].downwardAPI.fieldRef: Invalid value: \"Bad Key\": {why}")),
        );
        want.extend([
            "spec.volumes[0].downwardAPI: Invalid value: \"resource\": fieldRef and resourceFieldRef can not be specified simultaneously".to_string(),
            "spec.volumes[0].downwardAPI: Required value: one of fieldRef and resourceFieldRef is required".into(),
            "spec.volumes[0].downwardAPI.resourceFieldRef.resource: Unsupported value: \"limits.gpu\": supported values: \"limits.cpu\", \"limits.ephemeral-storage\", \"limits.memory\", \"requests.cpu\", \"requests.ephemeral-storage\", \"requests.memory\"".into(),
            "spec.volumes[1].projected.sources[0].serviceAccountToken.expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes".into(),
            "spec.volumes[1].projected.path: Invalid value: \"/token\": must be a relative path".into(),
            "spec.volumes[1].projected: Invalid value: \"a\": conflicting duplicate paths".into(),
            "spec.volumes[1].projected.sources[1]: Forbidden: may not specify more than 1 volume type per source".into(),
        ]);
        let env_want = [
            "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Invalid value: \"metadata.name\": error converting fieldPath: unsupported pod version: v2".to_string(),
            "spec.containers[0].env[1].valueFrom.fieldRef.fieldPath: Unsupported value: \"status.phase\": supported values: \"metadata.name\", \"metadata.namespace\", \"metadata.uid\", \"spec.nodeName\", \"spec.serviceAccountName\", \"status.hostIP\", \"status.hostIPs\", \"status.podIP\", \"status.podIPs\"".into(),
            format!("spec.containers[0].env[2].valueFrom.configMapKeyRef.key: Invalid value: \"bad key\": {}", key[0]),
            "spec.containers[0].env[3].valueFrom.resourceFieldRef.divisor: Invalid value: \"limits.memory\": only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are supported with the memory resource".into(),
            "spec.containers[0].env[4].valueFrom.resourceFieldRef.divisor: Invalid value: \"requests.cpu\": only divisor's values 1m and 1 are supported with the cpu resource".into(),
        ];
        for w in want.iter().chain(&env_want) {
            assert!(got.contains(w), "{w}\nin {got:#?}");
        }
        assert_eq!(got.len(), want.len() + env_want.len(), "{got:#?}");
    }

    #[test]
    fn mounts_devices_and_ephemeral_claims() {
        let volumes = json!([
            {"name": "data", "ephemeral": {"volumeClaimTemplate": {"metadata": {"name": "x", "labels": {"a": "b"}},
                "spec": {"accessModes": [], "resources": {"requests": {"storage": "1Gi"}}}}}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": "web-data"}},
            {"name": "cm", "configMap": {"name": "c"}},
            {"name": "eph", "ephemeral": {}},
        ]);
        let containers = json!([{"name": "c", "image": "x",
            "volumeMounts": [
                {"name": "cm", "mountPath": "/a", "subPath": "../x", "mountPropagation": "Bidirectional", "recursiveReadOnly": "Enabled"},
                {"name": "cm", "mountPath": "/b", "subPath": "s", "subPathExpr": "e"}],
            "volumeDevices": [{"name": "cm", "devicePath": "/a"}, {"name": "data", "devicePath": "/dev/x"},
                {"name": "data", "devicePath": "/dev/../x"}]}]);
        let got = messages("Pod", pod(volumes, containers));
        let want = [
            "spec.volumes[0].ephemeral.volumeClaimTemplate.metadata.name: Forbidden: cannot be set",
            "spec.volumes[0].ephemeral.volumeClaimTemplate.spec.accessModes: Required value: at least 1 access mode is required",
            "spec.volumes[3].ephemeral.volumeClaimTemplate: Required value",
            "spec.volumes[1].persistentVolumeClaim.claimName: Invalid value: \"web-data\": must not reference a PVC that gets created for an ephemeral volume",
            "spec.containers[0].volumeMounts[0].name: Invalid value: \"cm\": must not already exist in volumeDevices",
            "spec.containers[0].volumeMounts[0].mountPath: Invalid value: \"/a\": must not already exist as a path in volumeDevices",
            "spec.containers[0].volumeMounts.subPath: Invalid value: \"../x\": must not contain '..'",
            "spec.containers[0].volumeMounts.mountPropagation: Forbidden: Bidirectional mount propagation is available only to privileged containers",
            "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when readOnly is true",
            "spec.containers[0].volumeMounts.recursiveReadOnly: Forbidden: may only be specified when mountPropagation is None or not specified",
            "spec.containers[0].volumeMounts[1].name: Invalid value: \"cm\": must not already exist in volumeDevices",
            "spec.containers[0].volumeMounts[1].subPathExpr: Invalid value: \"e\": subPathExpr and subPath are mutually exclusive",
            "spec.containers[0].volumeDevices[0].name: Invalid value: \"cm\": can only use volume source type of PersistentVolumeClaim or Ephemeral for block mode",
            "spec.containers[0].volumeDevices[0].name: Invalid value: \"cm\": must not already exist in volumeMounts",
            "spec.containers[0].volumeDevices[0].devicePath: Invalid value: \"/a\": must not already exist as a path in volumeMounts",
            "spec.containers[0].volumeDevices[2].name: Invalid value: \"data\": must be unique",
            "spec.containers[0].volumeDevices[2].devicePath: Invalid value: \"/dev/../x\": can not contain backsteps ('..')",
        ];
        for w in want {
            assert!(got.iter().any(|g| g == w), "{w}\nin {got:#?}");
        }
        assert_eq!(got.len(), want.len(), "{got:#?}");
        // The claim an ephemeral volume makes is named after the pod, and must be a valid name.
        let long = json!({"metadata": {"name": "p".repeat(250)}, "spec": {"containers": one_container(),
            "volumes": [{"name": "data", "ephemeral": {"volumeClaimTemplate": {
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}}]}});
        let claim = format!("{}-data", "p".repeat(250));
        assert_eq!(
            messages("Pod", long),
            [format!("spec.volumes[0].name: Invalid value: \"data\": PVC name {claim:?}: must be no more than 253 characters")]
        );
    }

    #[test]
    fn host_port_pairs_split_as_go_splits_them() {
        for ok in ["h:1", "[::1]:1", "h:", "10.0.0.1:7861"] {
            assert!(splits_host_port(ok), "{ok}");
        }
        for bad in ["h", "::1:1", "[::1]", "[a]b:1", "h]:1", "[h:1", "a[b:1"] {
            assert!(!splits_host_port(bad), "{bad}");
        }
    }

    #[test]
    fn a_registry_of_many_bad_pairs_makes_a_bounded_answer() {
        let registry = vec!["b"; 100_000].join(",");
        let volumes = json!([{"name": "q", "quobyte": {"registry": registry, "volume": "v"}}]);
        let causes = errors("v1", "Pod", &pod(volumes, one_container()), None);
        assert_eq!(causes.len(), MAX_CAUSES);
        let size: usize = causes.iter().map(|c| c.message.len()).sum();
        assert!(size <= MAX_CAUSES * (MAX_MESSAGE + 200), "{size} bytes of messages");
    }
}
