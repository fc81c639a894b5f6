//! kube's checks of storage.k8s.io/v1's CSI kinds (kube 1.33's `pkg/apis/storage/validation`):
//! CSIDrivers, CSINodes, VolumeAttachments (an inline volume's spec among them) and
//! CSIStorageCapacities, with the update rules `update::KEPT` does not hold.

use super::*;

/// The causes of a check written for a struct at the root, moved under `prefix`: kgate's `Path`s
/// are made by the schema walk alone, and these kinds are checked without one.
fn list(v: &Value) -> &[Value] {
    v.as_array().map_or(&[][..], Vec::as_slice)
}

fn too_long(causes: &mut Vec<Cause>, at: &str, max: usize) {
    push(causes, cause("FieldValueTooLong", at, format!("Too long: may not be more than {max} bytes")));
}

/// A CSIDriver (kube's `ValidateCSIDriver`). Its booleans are defaulted, so kube's Required checks
/// of them never fire; `nodeAllocatableUpdatePeriodSeconds` is dropped by 1.33, whose
/// `MutableCSINodeAllocatableCount` gate is off, so it is not checked.
pub(super) fn csi_driver(obj: &Value, causes: &mut Vec<Cause>) {
    const FS_GROUP_POLICIES: &[&str] = &["File", "None", "ReadWriteOnceWithFSType"];
    let spec = &obj["spec"];
    // Not one_of_at: kube refuses "" as unsupported, not as missing.
    if let Some(policy) = spec.get("fsGroupPolicy").filter(|p| !p.is_null()) {
        if !policy.as_str().is_some_and(|p| FS_GROUP_POLICIES.contains(&p)) {
            not_supported(causes, "spec.fsGroupPolicy".into(), policy, FS_GROUP_POLICIES);
        }
    }
    let mut audiences = HashSet::new();
    for (i, request) in list(&spec["tokenRequests"]).iter().enumerate() {
        let at = format!("spec.tokenRequests[{i}]");
        let audience = request["audience"].as_str().unwrap_or_default();
        if !audiences.insert(audience) {
            duplicate(causes, &format!("{at}.audience"), audience);
            continue;
        }
        let Some(seconds) = request["expirationSeconds"].as_i64() else { continue };
        if seconds < 600 {
            let why = "may not specify a duration less than 10 minutes";
            invalid(causes, format!("{at}.expirationSeconds"), seconds.to_string(), why);
        }
        if seconds > 1_i64 << 32 {
            let why = "may not specify a duration larger than 2^32 seconds";
            invalid(causes, format!("{at}.expirationSeconds"), seconds.to_string(), why);
        }
    }
    // kube names the list, not the item.
    for mode in list(&spec["volumeLifecycleModes"]) {
        if !mode.as_str().is_some_and(|m| m == "Persistent" || m == "Ephemeral") {
            not_supported(causes, "spec.volumeLifecycleModes".into(), mode, &["Persistent", "Ephemeral"]);
        }
    }
}

/// A CSINode (kube's `ValidateCSINode`, with the 256-character node IDs kube allows since 1.22):
/// drivers named once each, with a node ID, a count not below zero, and topology keys that are
/// distinct qualified names (kube reports those at the driver, not at `topologyKeys`).
pub(super) fn csi_node(obj: &Value, causes: &mut Vec<Cause>) {
    let mut names = HashSet::new();
    for (i, driver) in list(&obj["spec"]["drivers"]).iter().enumerate() {
        let at = format!("spec.drivers[{i}]");
        let name = driver["name"].as_str().unwrap_or_default();
        csi_driver_name(causes, format!("{at}.name"), name);
        match driver["nodeID"].as_str().unwrap_or_default() {
            "" => required(causes, format!("{at}.nodeID")),
            id if id.len() > 256 => {
                invalid(causes, format!("{at}.nodeID"), format!("{id:?}"), "must be 256 characters or less")
            }
            _ => {}
        }
        if let Some(count) = driver["allocatable"]["count"].as_i64().filter(|n| *n < 0) {
            let why = "must be greater than or equal to 0";
            invalid(causes, format!("{at}.allocatable.count"), count.to_string(), why);
        }
        if !names.insert(name) {
            duplicate(causes, &format!("{at}.name"), name);
        }
        let mut keys = HashSet::new();
        for key in list(&driver["topologyKeys"]).iter().map(|k| k.as_str().unwrap_or_default()) {
            if key.is_empty() {
                required(causes, at.clone());
            }
            if !keys.insert(key) {
                duplicate(causes, &at, key);
            }
            label_key(causes, &at, key);
        }
    }
}

/// What a CSINode keeps (kube's `ValidateCSINodeUpdate`): each driver it lists stays as it was,
/// its allocatable count too (1.33's `MutableCSINodeAllocatableCount` is off). kube shows the Go
/// struct, pointers' addresses and all; kgate the driver's JSON.
pub(super) fn csi_node_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    // kube compares semantically: a null or an empty list is no value.
    let plain = |d: &Value| -> Map<String, Value> {
        d.as_object()
            .into_iter()
            .flatten()
            .filter(|(_, v)| !v.is_null() && v.as_array().is_none_or(|a| !a.is_empty()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    // By name: a node of many drivers costs their number, not its square.
    let before: std::collections::HashMap<&str, &Value> =
        list(&old["spec"]["drivers"]).iter().filter_map(|d| Some((d["name"].as_str()?, d))).collect();
    for is in list(&new["spec"]["drivers"]) {
        let was = is["name"].as_str().and_then(|n| before.get(n));
        if was.is_some_and(|was| plain(was) != plain(is)) {
            invalid(causes, "spec.drivers".into(), shown(is), "field is immutable");
        }
    }
}

/// A VolumeAttachment (kube's `ValidateVolumeAttachment` and, as kube validates new v1 objects,
/// `ValidateVolumeAttachmentV1`, whose errors come after): an attacher that is a CSI driver's name,
/// one source, a node. Its status is checked as kube checks the status subresource's writes (kube
/// clears the status of a new object before).
pub(super) fn volume_attachment(obj: &Value, causes: &mut Vec<Cause>) {
    const ONE_SOURCE: &str = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    let (spec, status) = (&obj["spec"], &obj["status"]);
    let attacher = spec["attacher"].as_str().unwrap_or_default();
    if attacher.is_empty() {
        required(causes, "spec.attacher".into());
    }
    let source = &spec["source"];
    let inline = source.get("inlineVolumeSpec").filter(|v| !v.is_null());
    let volume_name =
        source.get("persistentVolumeName").filter(|v| !v.is_null()).map(|v| v.as_str().unwrap_or_default());
    match (inline, volume_name) {
        (None, None) => required_why(causes, "spec.source", ONE_SOURCE),
        (Some(_), Some(_)) => forbidden(causes, "spec.source", ONE_SOURCE),
        (None, Some("")) => {
            let why = "must specify non empty persistentVolumeName";
            required_why(causes, "spec.source.persistentVolumeName", why)
        }
        (None, Some(_)) => {}
        (Some(inline), None) => inline_volume(inline, causes),
    }
    let node = spec["nodeName"].as_str().unwrap_or_default();
    for why in meta::dns1123_subdomain_errors(node) {
        invalid(causes, "spec.nodeName".into(), format!("{node:?}"), &why);
    }
    if let Some(metadata) = status["attachmentMetadata"].as_object() {
        let size: usize = metadata.iter().map(|(k, v)| k.len() + v.as_str().map_or(0, str::len)).sum();
        if size > 256 * 1024 {
            too_long(causes, "status.attachmentMetadata", 256 * 1024);
        }
    }
    for error in ["attachError", "detachError"] {
        if status[error]["message"].as_str().is_some_and(|m| m.len() > 1024) {
            // kube's words name the metadata's limit here, not the message's 1024.
            too_long(causes, &format!("status.{error}.message"), 256 * 1024);
        }
    }
    csi_driver_name(causes, "spec.attacher".into(), attacher);
    if let Some(name) = volume_name {
        for why in meta::dns1123_subdomain_errors(name) {
            invalid(causes, "spec.source.persistentVolumeName".into(), format!("{name:?}"), &why);
        }
    }
}

/// A VolumeAttachment's inline volume (kube's `ValidatePersistentVolumeSpec` for inline volumes): a
/// CSI volume with access modes, and nothing only a PersistentVolume object has. Of the sources'
/// own fields only the CSI source's are checked, the one an inline volume may have.
fn inline_volume(spec: &Value, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.source.inlineVolumeSpec";
    const INLINE: &str = "may not be specified in the context of inline volumes";
    let set = |f: &str| spec.get(f).is_some_and(|v| !v.is_null());
    if set("claimRef") {
        forbidden(causes, &format!("{AT}.claimRef"), INLINE);
    }
    if spec["capacity"].as_object().is_some_and(|c| !c.is_empty()) {
        forbidden(causes, &format!("{AT}.capacity"), INLINE);
    }
    if !set("csi") {
        required_why(causes, &format!("{AT}.csi"), "has to be specified in the context of inline volumes");
    }
    let modes = list(&spec["accessModes"]);
    if modes.is_empty() {
        required(causes, format!("{AT}.accessModes"));
    }
    let known = |m: &Value| m.as_str().is_some_and(|m| ACCESS_MODES.contains(&m));
    for mode in modes.iter().filter(|m| !known(m)) {
        not_supported(causes, format!("{AT}.accessModes"), mode, ACCESS_MODES);
    }
    if modes.iter().any(|m| m == "ReadWriteOncePod") && modes.iter().any(|m| known(m) && m != "ReadWriteOncePod") {
        forbidden(causes, &format!("{AT}.accessModes"), "may not use ReadWriteOncePod with other access modes");
    }
    if spec["persistentVolumeReclaimPolicy"].as_str().is_some_and(|p| !p.is_empty() && p != "Retain") {
        let why = "may only be Retain in the context of inline volumes";
        forbidden(causes, &format!("{AT}.persistentVolumeReclaimPolicy"), why);
    }
    if set("nodeAffinity") {
        forbidden(causes, &format!("{AT}.nodeAffinity"), INLINE);
    }
    let sources: Vec<&str> = VOLUME_SOURCES.iter().copied().filter(|s| set(s)).collect();
    match sources.as_slice() {
        [] => required_why(causes, AT, "must specify a volume type"),
        [first, extra @ ..] => {
            // The first source is checked before the others are refused; CSI, last in kube's
            // order, is checked only when alone.
            match *first {
                "csi" => {
                    if let Some(csi) = spec["csi"].as_object() {
                        under(&format!("{AT}.csi"), causes, |c| csi_volume_source(csi, &Path::default(), c));
                    }
                }
                // kube reads no inline volume's node affinity, so a local one always lacks it.
                "local" => required_why(causes, &format!("{AT}.nodeAffinity"), "Local volume requires node affinity"),
                _ => {}
            }
            // kube never names a FlexVolume as the one too many.
            for source in extra.iter().filter(|s| **s != "flexVolume") {
                let name = if *source == "cephfs" { "cephFS" } else { *source };
                forbidden(causes, &format!("{AT}.{name}"), "may not specify more than 1 volume type");
            }
        }
    }
    if spec["storageClassName"].as_str().is_some_and(|c| !c.is_empty()) {
        forbidden(causes, &format!("{AT}.storageClassName"), INLINE);
    }
    if spec.get("volumeMode").is_some_and(|m| !m.is_null() && m != "Filesystem") {
        let why = "may not specify volumeMode other than Filesystem in the context of inline volumes";
        forbidden(causes, &format!("{AT}.volumeMode"), why);
    }
}

/// A CSIStorageCapacity (kube's `ValidateCSIStorageCapacity`): a node topology that is a label
/// selector, a storage class's name, a capacity not below zero.
pub(super) fn csi_storage_capacity(obj: &Value, causes: &mut Vec<Cause>) {
    if let Some(selector) = obj["nodeTopology"].as_object() {
        under("nodeTopology", causes, |c| label_selector(selector, &Path::default(), c));
    }
    let class = obj["storageClassName"].as_str().unwrap_or_default();
    for why in meta::dns1123_subdomain_errors(class) {
        invalid(causes, "storageClassName".into(), format!("{class:?}"), &why);
    }
    if let Some(capacity) = obj.get("capacity").filter(|q| !q.is_null()) {
        let zero = Value::String("0".into());
        if crate::registry::quantity::compare(capacity, &zero).is_some_and(|o| o.is_lt()) {
            invalid(causes, "capacity".into(), shown(capacity), "must be greater than or equal to 0");
        }
    }
}

/// What a CSIStorageCapacity keeps (kube's `ValidateCSIStorageCapacityUpdate`): the inputs of the
/// driver's GetCapacity call, its node topology and storage class.
pub(super) fn csi_storage_capacity_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let topology = super::update::at(new, "nodeTopology");
    if super::update::at(old, "nodeTopology") != topology {
        let is = topology.map_or_else(|| "null".to_string(), go_selector);
        invalid(causes, "nodeTopology".into(), is, "field is immutable");
    }
    let class = |o: &Value| o["storageClassName"].as_str().unwrap_or_default().to_string();
    if class(old) != class(new) {
        invalid(causes, "storageClassName".into(), format!("{:?}", class(new)), "field is immutable");
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, update};
    use super::*;
    use serde_json::json;

    fn subdomain() -> String {
        meta::validate_dns1123_subdomain("A").unwrap_err()
    }

    #[test]
    fn csi_drivers() {
        let good = json!({"metadata": {"name": "csi.example.com"}, "spec": {"attachRequired": true,
            "fsGroupPolicy": "File", "volumeLifecycleModes": ["Persistent", "Ephemeral"],
            "tokenRequests": [{"audience": "a", "expirationSeconds": 3600}, {"audience": ""}]}});
        assert_eq!(check(csi_driver, good), Vec::<String>::new());
        let bad = json!({"spec": {"fsGroupPolicy": "Any", "volumeLifecycleModes": ["Persistent", "Forever"],
            "tokenRequests": [{"audience": "a", "expirationSeconds": 60}, {"audience": "a"},
                {"audience": "b", "expirationSeconds": 5_000_000_000_i64}]}});
        assert_eq!(
            check(csi_driver, bad),
            [
                "spec.fsGroupPolicy: Unsupported value: \"Any\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
                "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
                "spec.tokenRequests[1].audience: Duplicate value: \"a\"",
                "spec.tokenRequests[2].expirationSeconds: Invalid value: 5000000000: may not specify a duration larger than 2^32 seconds",
                "spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"",
            ]
        );
    }

    #[test]
    fn csi_nodes() {
        let good = json!({"metadata": {"name": "node-1"}, "spec": {"drivers": [{"name": "csi.example.com",
            "nodeID": "node-1", "topologyKeys": ["topology.kubernetes.io/zone"], "allocatable": {"count": 10}}]}});
        assert_eq!(check(csi_node, good), Vec::<String>::new());
        let long = "x".repeat(257);
        let bad = json!({"spec": {"drivers": [
            {"name": "csi.example.com", "nodeID": "", "allocatable": {"count": -1}, "topologyKeys": ["zone", "zone", ""]},
            {"name": "csi.example.com", "nodeID": long.clone()},
            {"name": "Bad_Driver", "nodeID": "n"}]}});
        let mut want = vec![
            "spec.drivers[0].nodeID: Required value".to_string(),
            "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0".to_string(),
            "spec.drivers[0]: Duplicate value: \"zone\"".to_string(),
            "spec.drivers[0]: Required value".to_string(),
        ];
        want.extend(
            meta::qualified_name_errors("").iter().map(|e| format!("spec.drivers[0]: Invalid value: \"\": {e}")),
        );
        want.push(format!("spec.drivers[1].nodeID: Invalid value: {long:?}: must be 256 characters or less"));
        want.push("spec.drivers[1].name: Duplicate value: \"csi.example.com\"".to_string());
        want.push(format!("spec.drivers[2].name: Invalid value: \"Bad_Driver\": {}", subdomain()));
        assert_eq!(check(csi_node, bad), want);
    }

    #[test]
    fn a_csi_nodes_drivers_are_kept() {
        let old = json!({"spec": {"drivers": [{"name": "a", "nodeID": "n1", "topologyKeys": []}]}});
        let added = json!({"spec": {"drivers": [{"name": "a", "nodeID": "n1"}, {"name": "b", "nodeID": "n"}]}});
        assert_eq!(update(csi_node_update, old.clone(), added), Vec::<String>::new());
        let changed = json!({"spec": {"drivers": [{"name": "a", "nodeID": "n2"}]}});
        assert_eq!(
            update(csi_node_update, old, changed),
            ["spec.drivers: Invalid value: {\"name\":\"a\",\"nodeID\":\"n2\"}: field is immutable"]
        );
    }

    #[test]
    fn volume_attachments() {
        let good = json!({"metadata": {"name": "csi-123"}, "spec": {"attacher": "csi.example.com",
            "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}}});
        assert_eq!(check(volume_attachment, good), Vec::<String>::new());
        let inline = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"inlineVolumeSpec":
            {"accessModes": ["ReadWriteOnce"], "csi": {"driver": "csi.example.com", "volumeHandle": "h"}}}}});
        assert_eq!(check(volume_attachment, inline), Vec::<String>::new());
        let s = subdomain();
        let empty = json!({"spec": {"attacher": "", "nodeName": "Node_1", "source": {}}});
        assert_eq!(
            check(volume_attachment, empty),
            [
                "spec.attacher: Required value".to_string(),
                "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName"
                    .to_string(),
                format!("spec.nodeName: Invalid value: \"Node_1\": {s}"),
                "spec.attacher: Required value".to_string(),
                format!("spec.attacher: Invalid value: \"\": {s}"),
            ]
        );
        let both = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n",
            "source": {"persistentVolumeName": "pv", "inlineVolumeSpec": {}}}});
        assert_eq!(
            check(volume_attachment, both),
            ["spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName"]
        );
        let unnamed = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n",
            "source": {"persistentVolumeName": ""}}});
        assert_eq!(
            check(volume_attachment, unnamed),
            [
                "spec.source.persistentVolumeName: Required value: must specify non empty persistentVolumeName"
                    .to_string(),
                format!("spec.source.persistentVolumeName: Invalid value: \"\": {s}"),
            ]
        );
        let status = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n",
            "source": {"persistentVolumeName": "pv"}}, "status": {"attachError": {"message": "x".repeat(1025)}}});
        assert_eq!(
            check(volume_attachment, status),
            ["status.attachError.message: Too long: may not be more than 262144 bytes"]
        );
    }

    #[test]
    fn an_inline_volume_is_a_csi_volume_alone() {
        let at = "spec.source.inlineVolumeSpec";
        let spec = json!({"capacity": {"storage": "1Gi"}, "claimRef": {"name": "c"},
            "accessModes": ["ReadWriteOncePod", "ReadWriteOnce", "Sometimes"], "persistentVolumeReclaimPolicy": "Delete",
            "hostPath": {"path": "/"}, "csi": {"driver": "csi.example.com", "volumeHandle": "h"},
            "storageClassName": "fast", "volumeMode": "Block"});
        let obj =
            json!({"spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"inlineVolumeSpec": spec}}});
        let want: Vec<String> = [
            "claimRef: Forbidden: may not be specified in the context of inline volumes",
            "capacity: Forbidden: may not be specified in the context of inline volumes",
            "accessModes: Unsupported value: \"Sometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
            "accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
            "persistentVolumeReclaimPolicy: Forbidden: may only be Retain in the context of inline volumes",
            "csi: Forbidden: may not specify more than 1 volume type",
            "storageClassName: Forbidden: may not be specified in the context of inline volumes",
            "volumeMode: Forbidden: may not specify volumeMode other than Filesystem in the context of inline volumes",
        ]
        .iter()
        .map(|w| format!("{at}.{w}"))
        .collect();
        assert_eq!(check(volume_attachment, obj), want);
        let bare = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n", "source": {"inlineVolumeSpec":
            {"accessModes": ["ReadWriteOnce"], "csi": {"driver": "csi.example.com"}}}}});
        assert_eq!(check(volume_attachment, bare), [format!("{at}.csi.volumeHandle: Required value")]);
        let sourceless = json!({"spec": {"attacher": "csi.example.com", "nodeName": "n",
            "source": {"inlineVolumeSpec": {"accessModes": ["ReadWriteOnce"]}}}});
        assert_eq!(
            check(volume_attachment, sourceless),
            [
                format!("{at}.csi: Required value: has to be specified in the context of inline volumes"),
                format!("{at}: Required value: must specify a volume type"),
            ]
        );
    }

    #[test]
    fn csi_storage_capacities() {
        let good = json!({"metadata": {"name": "c", "namespace": "ns"}, "storageClassName": "fast",
            "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "a"}}, "capacity": "10Gi"});
        assert_eq!(check(csi_storage_capacity, good), Vec::<String>::new());
        let bad = json!({"storageClassName": "", "nodeTopology": {"matchLabels": {"zone": "not ok!"}},
            "capacity": "-1Gi"});
        let label = &meta::label_value_errors("not ok!")[0];
        assert_eq!(
            check(csi_storage_capacity, bad),
            [
                format!("nodeTopology.matchLabels: Invalid value: \"not ok!\": {label}"),
                format!("storageClassName: Invalid value: \"\": {}", subdomain()),
                "capacity: Invalid value: \"-1Gi\": must be greater than or equal to 0".to_string(),
            ]
        );
    }

    #[test]
    fn a_capacitys_inputs_are_kept() {
        let old = json!({"storageClassName": "a", "nodeTopology": {"matchLabels": {"z": "1"}}, "capacity": "1Gi"});
        let resized = json!({"storageClassName": "a", "nodeTopology": {"matchLabels": {"z": "1"}}, "capacity": "2Gi"});
        assert_eq!(update(csi_storage_capacity_update, old.clone(), resized), Vec::<String>::new());
        let moved = json!({"storageClassName": "b", "nodeTopology": {"matchLabels": {"z": "2"}}});
        assert_eq!(
            update(csi_storage_capacity_update, old, moved),
            [
                "nodeTopology: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"z\":\"2\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
                "storageClassName: Invalid value: \"b\": field is immutable",
            ]
        );
    }
}
