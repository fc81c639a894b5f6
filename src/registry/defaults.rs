//! kube's defaults of the built-in types, as its generated defaulters apply them (kube 1.33's
//! `pkg/apis/*/v1/defaults.go` and the `+default=` markers of k8s.io/api): rules keyed by the Go struct
//! they belong to, applied wherever that struct appears (a Pod's containers and every workload
//! template's alike), by a walk of the object along its schema (`proto::visit`). Most rules are data
//! (`FIELDS`); the few that depend on other fields are functions (`computed`).
//!
//! Not applied: the rounding of resource quantities to milli-units (a quantity keeps the form it was
//! written in), defaults behind feature gates that are off in 1.33, and what admission plugins add
//! (a ServiceAccount's token volume, default tolerations), since no admission plugin runs here.

use serde_json::{json, Map, Value};

/// When a rule sets its field.
#[derive(Clone, Copy)]
enum When {
    /// Absent or null: a Go pointer that is nil.
    Missing,
    /// Absent, null, `""`, `0` or `[]`: a Go value that is its zero.
    Zero,
}

/// `(struct, field, when, default)`: the struct's name as `proto::visit` gives it.
type Rule = (&'static str, &'static str, When, fn() -> Value);

use When::{Missing, Zero};

/// Defaults that are constants.
const FIELDS: &[Rule] = &[
    // core/v1
    ("core.v1.PodSpec", "dnsPolicy", Zero, || json!("ClusterFirst")),
    ("core.v1.PodSpec", "restartPolicy", Zero, || json!("Always")),
    ("core.v1.PodSpec", "securityContext", Missing, || json!({})),
    ("core.v1.PodSpec", "terminationGracePeriodSeconds", Missing, || json!(30)),
    ("core.v1.PodSpec", "schedulerName", Zero, || json!("default-scheduler")),
    ("core.v1.Container", "terminationMessagePath", Zero, || json!("/dev/termination-log")),
    ("core.v1.Container", "terminationMessagePolicy", Zero, || json!("File")),
    ("core.v1.EphemeralContainerCommon", "terminationMessagePath", Zero, || json!("/dev/termination-log")),
    ("core.v1.EphemeralContainerCommon", "terminationMessagePolicy", Zero, || json!("File")),
    ("core.v1.ContainerPort", "protocol", Zero, || json!("TCP")),
    ("core.v1.ObjectFieldSelector", "apiVersion", Zero, || json!("v1")),
    ("core.v1.Probe", "timeoutSeconds", Zero, || json!(1)),
    ("core.v1.Probe", "periodSeconds", Zero, || json!(10)),
    ("core.v1.Probe", "successThreshold", Zero, || json!(1)),
    ("core.v1.Probe", "failureThreshold", Zero, || json!(3)),
    ("core.v1.HTTPGetAction", "path", Zero, || json!("/")),
    ("core.v1.HTTPGetAction", "scheme", Zero, || json!("HTTP")),
    ("core.v1.GRPCAction", "service", Missing, || json!("")),
    ("core.v1.HostPathVolumeSource", "type", Missing, || json!("")),
    ("core.v1.SecretVolumeSource", "defaultMode", Missing, || json!(420)),
    ("core.v1.ConfigMapVolumeSource", "defaultMode", Missing, || json!(420)),
    ("core.v1.DownwardAPIVolumeSource", "defaultMode", Missing, || json!(420)),
    ("core.v1.ProjectedVolumeSource", "defaultMode", Missing, || json!(420)),
    ("core.v1.ServiceAccountTokenProjection", "expirationSeconds", Missing, || json!(3600)),
    ("core.v1.ISCSIVolumeSource", "iscsiInterface", Zero, || json!("default")),
    ("core.v1.ISCSIPersistentVolumeSource", "iscsiInterface", Zero, || json!("default")),
    ("core.v1.RBDVolumeSource", "pool", Zero, || json!("rbd")),
    ("core.v1.RBDVolumeSource", "user", Zero, || json!("admin")),
    ("core.v1.RBDVolumeSource", "keyring", Zero, || json!("/etc/ceph/keyring")),
    ("core.v1.RBDPersistentVolumeSource", "pool", Zero, || json!("rbd")),
    ("core.v1.RBDPersistentVolumeSource", "user", Zero, || json!("admin")),
    ("core.v1.RBDPersistentVolumeSource", "keyring", Zero, || json!("/etc/ceph/keyring")),
    ("core.v1.AzureDiskVolumeSource", "cachingMode", Missing, || json!("ReadWrite")),
    ("core.v1.AzureDiskVolumeSource", "fsType", Missing, || json!("ext4")),
    ("core.v1.AzureDiskVolumeSource", "readOnly", Missing, || json!(false)),
    ("core.v1.AzureDiskVolumeSource", "kind", Missing, || json!("Shared")),
    ("core.v1.ScaleIOVolumeSource", "storageMode", Zero, || json!("ThinProvisioned")),
    ("core.v1.ScaleIOVolumeSource", "fsType", Zero, || json!("xfs")),
    ("core.v1.ScaleIOPersistentVolumeSource", "storageMode", Zero, || json!("ThinProvisioned")),
    ("core.v1.ScaleIOPersistentVolumeSource", "fsType", Zero, || json!("xfs")),
    ("core.v1.PersistentVolumeClaimSpec", "volumeMode", Missing, || json!("Filesystem")),
    ("core.v1.EndpointPort", "protocol", Zero, || json!("TCP")),
    ("core.v1.Secret", "type", Zero, || json!("Opaque")),
    ("core.v1.ReplicationControllerSpec", "replicas", Missing, || json!(1)),
    // apps/v1
    ("apps.v1.DeploymentSpec", "replicas", Missing, || json!(1)),
    ("apps.v1.DeploymentSpec", "revisionHistoryLimit", Missing, || json!(10)),
    ("apps.v1.DeploymentSpec", "progressDeadlineSeconds", Missing, || json!(600)),
    ("apps.v1.DaemonSetSpec", "revisionHistoryLimit", Missing, || json!(10)),
    ("apps.v1.StatefulSetSpec", "podManagementPolicy", Zero, || json!("OrderedReady")),
    ("apps.v1.StatefulSetSpec", "replicas", Missing, || json!(1)),
    ("apps.v1.StatefulSetSpec", "revisionHistoryLimit", Missing, || json!(10)),
    ("apps.v1.StatefulSetSpec", "persistentVolumeClaimRetentionPolicy", Missing, || json!({})),
    ("apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy", "whenDeleted", Zero, || json!("Retain")),
    ("apps.v1.StatefulSetPersistentVolumeClaimRetentionPolicy", "whenScaled", Zero, || json!("Retain")),
    ("apps.v1.ReplicaSetSpec", "replicas", Missing, || json!(1)),
    // batch/v1
    ("batch.v1.CronJobSpec", "concurrencyPolicy", Zero, || json!("Allow")),
    ("batch.v1.CronJobSpec", "suspend", Missing, || json!(false)),
    ("batch.v1.CronJobSpec", "successfulJobsHistoryLimit", Missing, || json!(3)),
    ("batch.v1.CronJobSpec", "failedJobsHistoryLimit", Missing, || json!(1)),
    // networking.k8s.io/v1
    ("networking.v1.NetworkPolicyPort", "protocol", Missing, || json!("TCP")),
    ("networking.v1.IngressClassParametersReference", "scope", Missing, || json!("Cluster")),
    // rbac.authorization.k8s.io/v1
    ("rbac.v1.RoleRef", "apiGroup", Zero, || json!("rbac.authorization.k8s.io")),
    // discovery.k8s.io/v1
    ("discovery.v1.EndpointPort", "name", Missing, || json!("")),
    ("discovery.v1.EndpointPort", "protocol", Missing, || json!("TCP")),
    // storage.k8s.io/v1
    ("storage.v1.StorageClass", "reclaimPolicy", Missing, || json!("Delete")),
    ("storage.v1.StorageClass", "volumeBindingMode", Missing, || json!("Immediate")),
    ("storage.v1.CSIDriverSpec", "attachRequired", Missing, || json!(true)),
    ("storage.v1.CSIDriverSpec", "podInfoOnMount", Missing, || json!(false)),
    ("storage.v1.CSIDriverSpec", "storageCapacity", Missing, || json!(false)),
    ("storage.v1.CSIDriverSpec", "fsGroupPolicy", Missing, || json!("ReadWriteOnceWithFSType")),
    ("storage.v1.CSIDriverSpec", "volumeLifecycleModes", Zero, || json!(["Persistent"])),
    ("storage.v1.CSIDriverSpec", "requiresRepublish", Missing, || json!(false)),
    ("storage.v1.CSIDriverSpec", "seLinuxMount", Missing, || json!(false)),
    // scheduling.k8s.io/v1
    ("scheduling.v1.PriorityClass", "preemptionPolicy", Missing, || json!("PreemptLowerPriority")),
    // admissionregistration.k8s.io/v1
    ("admissionregistration.v1.ValidatingWebhook", "failurePolicy", Missing, || json!("Fail")),
    ("admissionregistration.v1.ValidatingWebhook", "matchPolicy", Missing, || json!("Equivalent")),
    ("admissionregistration.v1.ValidatingWebhook", "namespaceSelector", Missing, || json!({})),
    ("admissionregistration.v1.ValidatingWebhook", "objectSelector", Missing, || json!({})),
    ("admissionregistration.v1.ValidatingWebhook", "timeoutSeconds", Missing, || json!(10)),
    ("admissionregistration.v1.MutatingWebhook", "failurePolicy", Missing, || json!("Fail")),
    ("admissionregistration.v1.MutatingWebhook", "matchPolicy", Missing, || json!("Equivalent")),
    ("admissionregistration.v1.MutatingWebhook", "namespaceSelector", Missing, || json!({})),
    ("admissionregistration.v1.MutatingWebhook", "objectSelector", Missing, || json!({})),
    ("admissionregistration.v1.MutatingWebhook", "timeoutSeconds", Missing, || json!(10)),
    ("admissionregistration.v1.MutatingWebhook", "reinvocationPolicy", Missing, || json!("Never")),
    ("admissionregistration.v1.ServiceReference", "port", Missing, || json!(443)),
    ("admissionregistration.v1.Rule", "scope", Missing, || json!("*")),
    ("admissionregistration.v1.ValidatingAdmissionPolicySpec", "failurePolicy", Missing, || json!("Fail")),
    ("admissionregistration.v1.MatchResources", "matchPolicy", Missing, || json!("Equivalent")),
    ("admissionregistration.v1.MatchResources", "namespaceSelector", Missing, || json!({})),
    ("admissionregistration.v1.MatchResources", "objectSelector", Missing, || json!({})),
    // flowcontrol.apiserver.k8s.io/v1
    ("flowcontrol.v1.FlowSchemaSpec", "matchingPrecedence", Zero, || json!(1000)),
    ("flowcontrol.v1.LimitedPriorityLevelConfiguration", "nominalConcurrencyShares", Missing, || json!(30)),
    ("flowcontrol.v1.LimitedPriorityLevelConfiguration", "lendablePercent", Missing, || json!(0)),
    ("flowcontrol.v1.QueuingConfiguration", "handSize", Zero, || json!(8)),
    ("flowcontrol.v1.QueuingConfiguration", "queues", Zero, || json!(64)),
    ("flowcontrol.v1.QueuingConfiguration", "queueLengthLimit", Zero, || json!(50)),
    ("flowcontrol.v1.ExemptPriorityLevelConfiguration", "nominalConcurrencyShares", Missing, || json!(0)),
    ("flowcontrol.v1.ExemptPriorityLevelConfiguration", "lendablePercent", Missing, || json!(0)),
];

/// Apply kube's defaults to `obj`, an object of `api_version`/`kind` (a built-in type). Fields of the
/// wrong type are left as they are, for the type check to refuse. The structs given defaults are
/// bounded by a multiple of the object's own size: a Pod of a million empty containers, a few bytes
/// each as sent, must not make the server build a million filled ones (past that, the rest are left
/// as sent, and kube's validation would refuse such a Pod anyway).
pub fn apply(api_version: &str, kind: &str, obj: &mut Value) {
    let size = count_values(obj, 0);
    let mut budget = 10_000 + size / 4;
    crate::proto::visit::visit_structs(api_version, kind, obj, 10_000 + size, &mut |name, map, _| {
        if budget == 0 {
            return;
        }
        budget -= 1;
        for (_, field, when, value) in rules_of(name) {
            if unset(map.get(*field), *when) {
                map.insert((*field).to_string(), value());
            }
        }
        computed(name, map);
    });
}

/// The rules of one struct: `FIELDS` indexed by struct name once, since every write visits each of its
/// structs.
fn rules_of(name: &str) -> &'static [&'static Rule] {
    static BY_STRUCT: std::sync::OnceLock<std::collections::HashMap<&'static str, Vec<&'static Rule>>> =
        std::sync::OnceLock::new();
    let index = BY_STRUCT.get_or_init(|| {
        let mut index: std::collections::HashMap<&'static str, Vec<&'static Rule>> = Default::default();
        for rule in FIELDS {
            index.entry(rule.0).or_default().push(rule);
        }
        index
    });
    index.get(name).map_or(&[], Vec::as_slice)
}

/// How many JSON values `v` holds (to a depth no Kubernetes type reaches).
fn count_values(v: &Value, depth: usize) -> usize {
    match v {
        _ if depth > 100 => 1,
        Value::Array(a) => 1 + a.iter().map(|x| count_values(x, depth + 1)).sum::<usize>(),
        Value::Object(m) => 1 + m.values().map(|x| count_values(x, depth + 1)).sum::<usize>(),
        _ => 1,
    }
}

/// Whether a field counts as not given.
fn unset(v: Option<&Value>, when: When) -> bool {
    match (v, when) {
        (None | Some(Value::Null), _) => true,
        (Some(_), Missing) => false,
        (Some(Value::String(s)), Zero) => s.is_empty(),
        (Some(Value::Number(n)), Zero) => n.as_f64() == Some(0.0),
        (Some(Value::Array(a)), Zero) => a.is_empty(),
        (Some(_), Zero) => false,
    }
}

fn str_of<'a>(map: &'a Map<String, Value>, field: &str) -> &'a str {
    map.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// Defaults that depend on other fields.
fn computed(name: &str, map: &mut Map<String, Value>) {
    match name {
        "core.v1.Container" | "core.v1.EphemeralContainerCommon" if unset(map.get("imagePullPolicy"), Zero) => {
            let policy = if image_tag_is_latest(str_of(map, "image")) { "Always" } else { "IfNotPresent" };
            map.insert("imagePullPolicy".into(), json!(policy));
        }
        // A volume that names no source is an emptyDir.
        "core.v1.Volume" if map.iter().all(|(k, v)| k == "name" || v.is_null()) => {
            map.insert("emptyDir".into(), json!({}));
        }
        "core.v1.Pod" => pod(map),
        "core.v1.Namespace" => {
            // Always the name, whatever was sent, so that selectors can pick namespaces by name.
            let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) else { return };
            let Some(name) = meta.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string)
            else {
                return;
            };
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if labels.is_null() {
                *labels = json!({});
            }
            if let Some(labels) = labels.as_object_mut() {
                labels.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
        "core.v1.PersistentVolumeClaim" => status_phase(map, "Pending"),
        "core.v1.PersistentVolume" => {
            status_phase(map, "Pending");
            if let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) {
                if unset(spec.get("persistentVolumeReclaimPolicy"), Zero) {
                    spec.insert("persistentVolumeReclaimPolicy".into(), json!("Retain"));
                }
                if unset(spec.get("volumeMode"), Missing) {
                    spec.insert("volumeMode".into(), json!("Filesystem"));
                }
            }
        }
        "core.v1.Node" => {
            if let Some(status) = map.get_mut("status").and_then(Value::as_object_mut) {
                if unset(status.get("allocatable"), Missing) {
                    if let Some(capacity) = status.get("capacity").filter(|c| c.is_object()).cloned() {
                        status.insert("allocatable".into(), capacity);
                    }
                }
            }
        }
        "core.v1.ReplicationController" => {
            let labels = template_labels(map);
            if let (Some(labels), Some(spec)) = (labels, map.get_mut("spec").and_then(Value::as_object_mut)) {
                // Absent, null or empty; one of the wrong type is left for the type check to refuse.
                let selector = spec.get("selector");
                if selector.is_none_or(|s| s.is_null() || s.as_object().is_some_and(Map::is_empty)) {
                    spec.insert("selector".into(), labels.clone());
                }
                labels_from_template(map, labels);
            }
        }
        "core.v1.LimitRangeItem" => limit_range_item(map),
        "apps.v1.DeploymentSpec" => rolling_update(map, "strategy", json!("25%"), json!("25%")),
        "apps.v1.DaemonSetSpec" => rolling_update(map, "updateStrategy", json!(1), json!(0)),
        "apps.v1.StatefulSetSpec" => stateful_set_strategy(map),
        "batch.v1.Job" => job(map),
        "networking.v1.NetworkPolicySpec" if unset(map.get("policyTypes"), Zero) => {
            let egress = map.get("egress").and_then(Value::as_array).is_some_and(|e| !e.is_empty());
            let types = if egress { json!(["Ingress", "Egress"]) } else { json!(["Ingress"]) };
            map.insert("policyTypes".into(), types);
        }
        "rbac.v1.Subject" if unset(map.get("apiGroup"), Zero) => {
            match str_of(map, "kind") {
                "ServiceAccount" => map.insert("apiGroup".into(), json!("")),
                "User" | "Group" => map.insert("apiGroup".into(), json!("rbac.authorization.k8s.io")),
                _ => None,
            };
        }
        _ => {}
    }
}

/// A new claim's data source given both ways (kube's `NormalizeDataSources`, on creates only): the
/// old `dataSource` copied to `dataSourceRef`, or a `dataSourceRef` within the claim's namespace copied
/// back, so that provisioners reading either field find it. First, as kube's
/// `EnforceDataSourceBackwardsCompatibility`, an old-style `dataSource` of anything but a claim or a
/// volume snapshot is dropped: before populators, such a claim got an empty volume, and still does.
pub(super) fn claim_data_sources(claim: &mut Value) {
    let Some(spec) = claim.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if let Some(source) = spec.get("dataSource").filter(|s| s.is_object()) {
        let group = source["apiGroup"].as_str().unwrap_or_default();
        let known = matches!(
            (group, source["kind"].as_str().unwrap_or_default()),
            ("", "PersistentVolumeClaim") | ("snapshot.storage.k8s.io", "VolumeSnapshot")
        );
        if !known {
            spec.remove("dataSource");
        }
    }
    let given = |v: Option<&Value>| v.filter(|v| v.is_object()).cloned();
    let reference = |v: &Value| {
        let mut out = Map::new();
        for field in ["apiGroup", "kind", "name"] {
            if let Some(x) = v.get(field).filter(|x| !x.is_null()) {
                out.insert(field.to_string(), x.clone());
            }
        }
        Value::Object(out)
    };
    match (given(spec.get("dataSource")), given(spec.get("dataSourceRef"))) {
        (Some(source), None) => {
            spec.insert("dataSourceRef".into(), reference(&source));
        }
        (None, Some(source)) if source["namespace"].as_str().unwrap_or_default().is_empty() => {
            spec.insert("dataSource".into(), reference(&source));
        }
        _ => {}
    }
}

/// What kube's pod strategy adds to a new pod's (anti-)affinity terms (`PrepareForCreate`, with 1.33's
/// `MatchLabelKeysInPodAffinity`): each of a term's `matchLabelKeys` the pod has a label for becomes
/// an `In` requirement of that value in the term's selector, each `mismatchLabelKeys` one a `NotIn`.
/// On creates only, before the checks (which refuse a key the selector then names twice), as kube.
pub(super) fn affinity_label_keys(pod: &mut Value) {
    let labels = pod["metadata"]["labels"].as_object().cloned().unwrap_or_default();
    let Some(affinity) = pod.get_mut("spec").and_then(|s| s.get_mut("affinity")).and_then(Value::as_object_mut) else {
        return;
    };
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(terms) = affinity.get_mut(kind).and_then(Value::as_object_mut) else { continue };
        let required = terms.get_mut("requiredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array_mut);
        for term in required.into_iter().flatten() {
            term_label_keys(term, &labels);
        }
        let preferred = terms.get_mut("preferredDuringSchedulingIgnoredDuringExecution").and_then(Value::as_array_mut);
        for weighted in preferred.into_iter().flatten() {
            if let Some(term) = weighted.get_mut("podAffinityTerm") {
                term_label_keys(term, &labels);
            }
        }
    }
}

fn term_label_keys(term: &mut Value, labels: &Map<String, Value>) {
    let keys = |field: &str| -> Vec<String> {
        term[field].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
    };
    let (matching, mismatching) = (keys("matchLabelKeys"), keys("mismatchLabelKeys"));
    // A term without a selector selects nothing, and is left so.
    let Some(selector) = term.get_mut("labelSelector").and_then(Value::as_object_mut) else { return };
    let added: Vec<Value> = [(matching, "In"), (mismatching, "NotIn")]
        .into_iter()
        .flat_map(|(keys, op)| keys.into_iter().map(move |k| (k, op)))
        .filter_map(|(key, op)| Some(json!({"key": key, "operator": op, "values": [labels.get(&key)?.clone()]})))
        .collect();
    if added.is_empty() {
        return;
    }
    let expressions = selector.entry("matchExpressions").or_insert_with(|| json!([]));
    if expressions.is_null() {
        *expressions = json!([]);
    }
    if let Some(list) = expressions.as_array_mut() {
        list.extend(added);
    }
}

/// Whether an image reference names the tag `latest`, explicitly or by naming none (and no digest),
/// as kube's `parsers.ParseImageName` reads it.
fn image_tag_is_latest(image: &str) -> bool {
    // An empty reference does not parse, and kube then leaves the tag empty: IfNotPresent.
    if image.is_empty() {
        return false;
    }
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    // A tag follows the last colon after the last slash (a colon before it is a registry's port).
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => !digest,
    }
}

fn status_phase(map: &mut Map<String, Value>, phase: &str) {
    let status = map.entry("status").or_insert_with(|| json!({}));
    if status.is_null() {
        *status = json!({});
    }
    if let Some(status) = status.as_object_mut() {
        if unset(status.get("phase"), Zero) {
            status.insert("phase".into(), json!(phase));
        }
    }
}

/// A Pod's own defaults (not its templates'): links to services on, each container's requests copied
/// from its limits where missing, and with the host's network a container port is also the host port.
fn pod(map: &mut Map<String, Value>) {
    let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if unset(spec.get("enableServiceLinks"), Missing) {
        spec.insert("enableServiceLinks".into(), json!(true));
    }
    let host_network = spec.get("hostNetwork") == Some(&Value::Bool(true));
    for list in ["containers", "initContainers"] {
        for c in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
        {
            if let Some(resources) = c.get_mut("resources").and_then(Value::as_object_mut) {
                if let Some(limits) = resources.get("limits").and_then(Value::as_object).cloned() {
                    let requests = resources.entry("requests").or_insert_with(|| json!({}));
                    if requests.is_null() {
                        *requests = json!({});
                    }
                    if let Some(requests) = requests.as_object_mut() {
                        for (k, v) in limits {
                            requests.entry(k).or_insert(v);
                        }
                    }
                }
            }
            if host_network {
                for p in c
                    .get_mut("ports")
                    .and_then(Value::as_array_mut)
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_object_mut)
                {
                    if unset(p.get("hostPort"), Zero) {
                        if let Some(port) = p.get("containerPort").cloned() {
                            p.insert("hostPort".into(), port);
                        }
                    }
                }
            }
        }
    }
}

/// The labels of a workload's pod template, when it has some.
fn template_labels(map: &Map<String, Value>) -> Option<Value> {
    map.get("spec")?.get("template")?.get("metadata")?.get("labels").filter(|l| l.is_object()).cloned()
}

/// The object's labels become its template's when it has none.
fn labels_from_template(map: &mut Map<String, Value>, labels: Value) {
    let Some(meta) = map.get_mut("metadata").and_then(Value::as_object_mut) else { return };
    if meta.get("labels").and_then(Value::as_object).is_none_or(Map::is_empty) {
        meta.insert("labels".into(), labels);
    }
}

/// A Deployment's or DaemonSet's strategy: RollingUpdate unless given, and then its two bounds.
fn rolling_update(spec: &mut Map<String, Value>, field: &str, max_unavailable: Value, max_surge: Value) {
    let strategy = spec.entry(field).or_insert_with(|| json!({}));
    if strategy.is_null() {
        *strategy = json!({});
    }
    let Some(strategy) = strategy.as_object_mut() else { return };
    if unset(strategy.get("type"), Zero) {
        strategy.insert("type".into(), json!("RollingUpdate"));
    }
    if str_of(strategy, "type") != "RollingUpdate" {
        return;
    }
    let rolling = strategy.entry("rollingUpdate").or_insert_with(|| json!({}));
    if rolling.is_null() {
        *rolling = json!({});
    }
    if let Some(rolling) = rolling.as_object_mut() {
        if unset(rolling.get("maxUnavailable"), Missing) {
            rolling.insert("maxUnavailable".into(), max_unavailable);
        }
        if unset(rolling.get("maxSurge"), Missing) {
            rolling.insert("maxSurge".into(), max_surge);
        }
    }
}

/// A StatefulSet's update strategy: RollingUpdate (with its `rollingUpdate`) only when no type is
/// given; a partition of 0 whenever a rolling update has one.
fn stateful_set_strategy(spec: &mut Map<String, Value>) {
    let strategy = spec.entry("updateStrategy").or_insert_with(|| json!({}));
    if strategy.is_null() {
        *strategy = json!({});
    }
    let Some(strategy) = strategy.as_object_mut() else { return };
    if unset(strategy.get("type"), Zero) {
        strategy.insert("type".into(), json!("RollingUpdate"));
        if unset(strategy.get("rollingUpdate"), Missing) {
            strategy.insert("rollingUpdate".into(), json!({}));
        }
    }
    if str_of(strategy, "type") != "RollingUpdate" {
        return;
    }
    if let Some(rolling) = strategy.get_mut("rollingUpdate").and_then(Value::as_object_mut) {
        if unset(rolling.get("partition"), Missing) {
            rolling.insert("partition".into(), json!(0));
        }
    }
}

/// A Job's defaults (not a CronJob template's, in kube 1.33): one completion and one pod at a time
/// unless either is given, six retries (or as many as an int32 holds, with a per-index limit), its
/// labels from its template, and the modes the API documents.
fn job(map: &mut Map<String, Value>) {
    if let Some(labels) = template_labels(map) {
        labels_from_template(map, labels);
    }
    let Some(spec) = map.get_mut("spec").and_then(Value::as_object_mut) else { return };
    let missing = |spec: &Map<String, Value>, f: &str| unset(spec.get(f), Missing);
    if missing(spec, "completions") && missing(spec, "parallelism") {
        spec.insert("completions".into(), json!(1));
    }
    if missing(spec, "parallelism") {
        spec.insert("parallelism".into(), json!(1));
    }
    if missing(spec, "backoffLimit") {
        let per_index = !missing(spec, "backoffLimitPerIndex");
        spec.insert("backoffLimit".into(), json!(if per_index { i64::from(i32::MAX) } else { 6 }));
    }
    if missing(spec, "completionMode") {
        spec.insert("completionMode".into(), json!("NonIndexed"));
    }
    if missing(spec, "suspend") {
        spec.insert("suspend".into(), json!(false));
    }
    if missing(spec, "manualSelector") {
        spec.insert("manualSelector".into(), json!(false));
    }
    if missing(spec, "podReplacementPolicy") {
        let failed = !missing(spec, "podFailurePolicy");
        spec.insert("podReplacementPolicy".into(), json!(if failed { "Failed" } else { "TerminatingOrFailed" }));
    }
    let rules = spec.get_mut("podFailurePolicy").and_then(|p| p.get_mut("rules")).and_then(Value::as_array_mut);
    for rule in rules.into_iter().flatten() {
        let patterns = rule.get_mut("onPodConditions").and_then(Value::as_array_mut);
        for p in patterns.into_iter().flatten().filter_map(Value::as_object_mut) {
            if unset(p.get("status"), Zero) {
                p.insert("status".into(), json!("True"));
            }
        }
    }
}

/// A Container limit range item: its default limits from `max`, its default requests from the default
/// limits and then from `min`, each only where not given.
fn limit_range_item(item: &mut Map<String, Value>) {
    if str_of(item, "type") != "Container" {
        return;
    }
    let map_of =
        |item: &Map<String, Value>, f: &str| item.get(f).and_then(Value::as_object).cloned().unwrap_or_default();
    let (max, min) = (map_of(item, "max"), map_of(item, "min"));
    let mut default = map_of(item, "default");
    for (k, v) in max {
        default.entry(k).or_insert(v);
    }
    let mut request = map_of(item, "defaultRequest");
    for (k, v) in default.iter().map(|(k, v)| (k.clone(), v.clone())).chain(min) {
        request.entry(k).or_insert(v);
    }
    for (f, m) in [("default", default), ("defaultRequest", request)] {
        if item.get(f).is_none_or(Value::is_object) {
            item.insert(f.into(), Value::Object(m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaulted(api_version: &str, kind: &str, mut obj: Value) -> Value {
        obj["apiVersion"] = json!(api_version);
        obj["kind"] = json!(kind);
        apply(api_version, kind, &mut obj);
        obj
    }

    #[test]
    fn a_deployments_template_gets_kubes_pod_and_container_defaults() {
        let d = defaulted(
            "apps/v1",
            "Deployment",
            json!({"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "nginx", "ports": [{"containerPort": 80}],
                            "livenessProbe": {"httpGet": {"port": 80}}, "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            "volumes": [{"name": "scratch"}, {"name": "cm", "configMap": {"name": "c"}}]}}}}),
        );
        let spec = &d["spec"];
        assert_eq!(spec["replicas"], 1);
        assert_eq!(
            spec["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
        );
        assert_eq!((&spec["revisionHistoryLimit"], &spec["progressDeadlineSeconds"]), (&json!(10), &json!(600)));
        let pod = &spec["template"]["spec"];
        assert_eq!(
            (&pod["restartPolicy"], &pod["dnsPolicy"], &pod["schedulerName"], &pod["terminationGracePeriodSeconds"]),
            (&json!("Always"), &json!("ClusterFirst"), &json!("default-scheduler"), &json!(30))
        );
        assert_eq!(pod["securityContext"], json!({}));
        assert!(pod.get("enableServiceLinks").is_none(), "a Pod's own default, not a template's");
        let c = &pod["containers"][0];
        assert_eq!((&c["imagePullPolicy"], &c["terminationMessagePolicy"]), (&json!("Always"), &json!("File")));
        assert_eq!(c["ports"][0]["protocol"], "TCP");
        assert_eq!(
            c["livenessProbe"],
            json!({"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3})
        );
        assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["apiVersion"], "v1");
        assert_eq!(pod["volumes"][0]["emptyDir"], json!({}));
        assert_eq!(pod["volumes"][1]["configMap"]["defaultMode"], 420);
        assert!(pod["volumes"][1].get("emptyDir").is_none());
    }

    #[test]
    fn image_pull_policy_follows_the_tag_as_kube_parses_it() {
        for (image, latest) in [
            ("nginx", true),
            ("nginx:latest", true),
            ("nginx:1.27", false),
            ("registry:5000/team/app", true),
            ("registry:5000/team/app:v2", false),
            ("nginx@sha256:abc", false),
            ("nginx:latest@sha256:abc", true),
            ("", false),
        ] {
            assert_eq!(image_tag_is_latest(image), latest, "{image}");
        }
    }

    #[test]
    fn defaults_that_depend_on_other_fields() {
        let p = defaulted(
            "v1",
            "Pod",
            json!({"spec": {"hostNetwork": true, "containers": [{"name": "c", "image": "i:1",
            "ports": [{"containerPort": 8080}], "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}}]}}),
        );
        let c = &p["spec"]["containers"][0];
        assert_eq!(c["resources"]["requests"], json!({"cpu": "1", "memory": "1Gi"}));
        assert_eq!((&c["ports"][0]["hostPort"], &c["imagePullPolicy"]), (&json!(8080), &json!("IfNotPresent")));
        assert_eq!(p["spec"]["enableServiceLinks"], true);

        let j = defaulted(
            "batch/v1",
            "Job",
            json!({"spec": {"parallelism": 3, "template": {"metadata": {"labels": {"app": "j"}}, "spec": {"restartPolicy": "Never"}}}}),
        );
        assert!(j["spec"].get("completions").is_none(), "a work queue keeps no completion count");
        assert_eq!((&j["spec"]["parallelism"], &j["spec"]["backoffLimit"]), (&json!(3), &json!(6)));
        assert_eq!(j["spec"]["podReplacementPolicy"], "TerminatingOrFailed");
        assert_eq!(j["metadata"]["labels"], json!({"app": "j"}));
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
        let cj =
            defaulted("batch/v1", "CronJob", json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {}}}}}}));
        assert!(
            cj["spec"]["jobTemplate"]["spec"].get("backoffLimit").is_none(),
            "1.33 gives a template no Job defaults"
        );
        assert_eq!(cj["spec"]["concurrencyPolicy"], "Allow");

        let s = defaulted("apps/v1", "StatefulSet", json!({"spec": {"updateStrategy": {"type": "RollingUpdate"}}}));
        assert!(s["spec"]["updateStrategy"].get("rollingUpdate").is_none(), "given a type, no rollingUpdate is made");
        assert_eq!(
            s["spec"]["persistentVolumeClaimRetentionPolicy"],
            json!({"whenDeleted": "Retain", "whenScaled": "Retain"})
        );
        let ds = defaulted("apps/v1", "DaemonSet", json!({"spec": {"updateStrategy": {"type": "OnDelete"}}}));
        assert_eq!(ds["spec"]["updateStrategy"], json!({"type": "OnDelete"}));

        let np = defaulted(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            json!({"spec": {"egress": [{"ports": [{"port": 53}]}]}}),
        );
        assert_eq!(np["spec"]["policyTypes"], json!(["Ingress", "Egress"]));
        assert_eq!(np["spec"]["egress"][0]["ports"][0]["protocol"], "TCP");
        let ns = defaulted(
            "v1",
            "Namespace",
            json!({"metadata": {"name": "apps", "labels": {"kubernetes.io/metadata.name": "other"}}}),
        );
        assert_eq!(ns["metadata"]["labels"]["kubernetes.io/metadata.name"], "apps");
        let rb = defaulted(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            json!({"roleRef": {"kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]}),
        );
        assert_eq!(
            (&rb["subjects"][0]["apiGroup"], &rb["subjects"][1]["apiGroup"]),
            (&json!("rbac.authorization.k8s.io"), &json!(""))
        );
        assert_eq!(rb["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        let lr = defaulted(
            "v1",
            "LimitRange",
            json!({"spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "1Mi"}}]}}),
        );
        assert_eq!(lr["spec"]["limits"][0]["default"], json!({"cpu": "2"}));
        assert_eq!(lr["spec"]["limits"][0]["defaultRequest"], json!({"cpu": "2", "memory": "1Mi"}));
        let w = defaulted(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            json!({"webhooks": [{"name": "w",
            "clientConfig": {"service": {"name": "s", "namespace": "n"}}, "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]}),
        );
        let hook = &w["webhooks"][0];
        assert_eq!(
            (&hook["failurePolicy"], &hook["timeoutSeconds"], &hook["clientConfig"]["service"]["port"]),
            (&json!("Fail"), &json!(10), &json!(443))
        );
        assert_eq!(hook["rules"][0]["scope"], "*");
        // Values given are kept, and a field of the wrong type is left for the type check.
        let d = defaulted("apps/v1", "Deployment", json!({"spec": {"replicas": 0, "revisionHistoryLimit": "x"}}));
        assert_eq!((&d["spec"]["replicas"], &d["spec"]["revisionHistoryLimit"]), (&json!(0), &json!("x")));
    }

    #[test]
    fn a_new_pods_label_keys_join_its_affinity_selectors() {
        let mut pod = json!({"metadata": {"labels": {"app": "web", "track": "canary"}}, "spec": {"affinity": {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "labelSelector": {"matchLabels": {"tier": "a"}},
                 "matchLabelKeys": ["app", "missing"], "mismatchLabelKeys": ["track"]},
                {"topologyKey": "zone", "matchLabelKeys": ["app"]}]},
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "zone", "labelSelector": {}, "matchLabelKeys": ["app"]}}]}}}});
        affinity_label_keys(&mut pod);
        let anti = &pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
        assert_eq!(
            anti[0]["labelSelector"]["matchExpressions"],
            json!([{"key": "app", "operator": "In", "values": ["web"]},
                   {"key": "track", "operator": "NotIn", "values": ["canary"]}])
        );
        assert!(anti[1].get("labelSelector").is_none(), "a term without a selector selects nothing: {anti}");
        let preferred = &pod["spec"]["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0];
        assert_eq!(
            preferred["podAffinityTerm"]["labelSelector"]["matchExpressions"],
            json!([{"key": "app", "operator": "In", "values": ["web"]}])
        );
    }
}
