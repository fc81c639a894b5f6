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
//! Every volume source is checked by its own fields (`volumes`), the in-tree cloud disks included;
//! containers' policies, probes, hooks and host ports, tolerations and a pod's own names and numbers
//! as kube's `ValidatePodSpec` checks them, DNS config and host aliases included (`containers`);
//! ephemeral containers' own rules (`containers`); security contexts, sysctls, user namespaces,
//! Windows options and what `spec.os` forbids (`security`).
//!
//! Not checked: kube-apiserver's `--allow-privileged`, off by default there and on in every cluster
//! tool's setup.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::meta;
use crate::proto::visit::Path;
use crate::status::{cause, Cause};

mod addresses;
mod admission;
mod admission_policy;
mod certificates;
mod cluster_kinds;
mod containers;
mod cron;
mod csi;
mod flowcontrol;
mod limits;
mod network;
mod pod;
mod rbac;
mod scaling;
mod scheduling;
mod security;
mod status;
mod storage;
mod update;
mod volumes;
mod workloads;

use addresses::*;
use admission::*;
use admission_policy::*;
use certificates::*;
use cluster_kinds::*;
use containers::*;
use csi::*;
use flowcontrol::*;
use limits::*;
use network::*;
use pod::*;
use rbac::*;
use scaling::*;
use scheduling::*;
use security::*;
use storage::*;
use volumes::*;
use workloads::*;

pub use status::{normalize_pod_ips, status_errors};
pub use update::update_errors;

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
    "NetworkPolicy",
    "PersistentVolumeClaim",
    "PodDisruptionBudget",
    "HorizontalPodAutoscaler",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ResourceQuota",
    "LimitRange",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "IngressClass",
    "RuntimeClass",
    "APIService",
    "Lease",
    "EndpointSlice",
    "FlowSchema",
    "PriorityLevelConfiguration",
    "CertificateSigningRequest",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "CSIStorageCapacity",
    "IPAddress",
    "ServiceCIDR",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// Causes reported at most: an object of a hundred thousand empty containers (a few bytes each as
/// sent) must not make an answer of megabytes. kube lists them all; the first ones tell the client
/// what is wrong.
const MAX_CAUSES: usize = 256;

/// The protocols a port may name (kube's `supportedPortProtocols`, listed sorted as kube lists a set).
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// kube's checks of `obj`, an object of the built-in `api_version`/`kind` (defaulted already, as kube
/// validates after defaulting), created or replacing `old`: the few checks kube makes on creates alone,
/// or relaxes for objects that already broke them, look at it.
pub fn errors(api_version: &str, kind: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = errors_of(api_version, kind, obj, old);
    // What the stored object already broke is not held against its update: kube relaxes its checks
    // for objects stored before them (label values in selectors, a node affinity's values, an
    // autoscaler's zero minimum), and kgate stored objects before it made most of these checks. A
    // change that breaks a rule anew is still refused.
    if let (Some(old), false) = (old, causes.is_empty()) {
        let before: HashSet<(String, String)> =
            errors_of(api_version, kind, old, None).into_iter().map(|c| (c.field, c.message)).collect();
        // kube lets any deletion cost through once the old object had a bad one.
        let cost_was_bad = |field: &str| before.iter().any(|(f, _)| f == field);
        let forgiven = |c: &Cause| {
            before.contains(&(c.field.clone(), c.message.clone()))
                || c.field.ends_with("[controller.kubernetes.io/pod-deletion-cost]") && cost_was_bad(&c.field)
        };
        causes.retain(|c| !forgiven(c));
    }
    causes
}

fn errors_of(api_version: &str, kind: &str, obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    if !CHECKED.contains(&kind) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    // Ephemeral containers come through their subresource alone (kube's `ValidatePodCreate`).
    if kind == "Pod" && old.is_none() && !is_empty(obj["spec"].get("ephemeralContainers")) {
        forbidden(&mut causes, "spec.ephemeralContainers", "cannot be set on create");
    }
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
    // Kinds whose checks are of their own fields, not of structs found along a walk.
    let own: Option<fn(&Value, &mut Vec<Cause>)> = match kind {
        "ResourceQuota" => Some(|o, c| quota(&o["spec"], c)),
        "LimitRange" => Some(|o, c| limit_range(&o["spec"], c)),
        "StorageClass" => Some(storage_class),
        "PriorityClass" => Some(priority_class),
        "IngressClass" => Some(ingress_class),
        "RuntimeClass" => Some(runtime_class),
        "APIService" => Some(api_service),
        "Lease" => Some(lease),
        "EndpointSlice" => Some(endpoint_slice),
        "FlowSchema" => Some(flow_schema),
        "PriorityLevelConfiguration" => Some(priority_level_configuration),
        "CertificateSigningRequest" => Some(certificate_signing_request),
        "CSIDriver" => Some(csi_driver),
        "CSINode" => Some(csi_node),
        "VolumeAttachment" => Some(volume_attachment),
        "CSIStorageCapacity" => Some(csi_storage_capacity),
        "IPAddress" => Some(ip_address),
        "ServiceCIDR" => Some(service_cidr),
        "ValidatingAdmissionPolicy" => Some(validating_admission_policy),
        "ValidatingAdmissionPolicyBinding" => Some(validating_admission_policy_binding),
        _ => None,
    };
    if let Some(check_own) = own {
        // kube clears a new VolumeAttachment's status before it validates: what a create sends there
        // is dropped, not checked.
        if kind == "VolumeAttachment" && old.is_none() && obj.get("status").is_some() {
            let mut bare = obj.clone();
            bare.as_object_mut().map(|m| m.remove("status"));
            check_own(&bare, &mut causes);
        } else {
            check_own(obj, &mut causes);
        }
        causes.truncate(MAX_CAUSES);
        return causes;
    }
    match kind {
        "PersistentVolumeClaim" => claim(&obj["spec"], &mut causes),
        "PersistentVolume" => {
            volume(&obj["spec"], &mut causes);
            if let Some(iscsi) = obj["spec"].get("iscsi").filter(|s| !s.is_null()) {
                let (name, portal) = (text(&obj["metadata"], "name"), text(iscsi, "targetPortal"));
                iscsi_name(name, iscsi, "spec.iscsi.targetportal".into(), portal, &mut causes);
            }
        }
        "CronJob" => cronjob(obj, old, &mut causes),
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
            webhook_configuration(kind, obj, old, &mut causes)
        }
        _ => {}
    }
    // The walk makes nothing (a budget of 0), so the copy is only what the walk's signature asks for.
    // kube validates a StatefulSet's template by its labels alone (its pods' mounts name the claim
    // templates, which are no volumes of the template's); the restart policy is checked with the spec.
    let statefulset = kind == "StatefulSet";
    crate::proto::visit::visit_structs(api_version, kind, &mut obj.clone(), 0, &mut |name, map, path| {
        // Its template's labels and annotations are checked all the same (kube's
        // `ValidatePodTemplateSpecForStatefulSet`).
        let template = name == "core.v1.PodTemplateSpec";
        if causes.len() >= MAX_CAUSES {
        } else if statefulset && template {
            // Not its ephemeral containers: kube leaves `ValidatePodTemplateSpec` out for it.
            pod_annotations(map, path, &mut causes)
        } else if !(statefulset && path.render().starts_with("spec.template")) {
            check(name, map, path, &mut causes)
        }
        prune(name, map);
    });
    causes.truncate(MAX_CAUSES);
    causes
}

/// Take out of the walk's copy what kube, having refused it whole, does not look into, so that its
/// fields' checks add no causes kube would not give: called on a struct once it is checked, before
/// what it holds is visited.
fn prune(name: &str, map: &mut Map<String, Value>) {
    match name {
        "core.v1.VolumeSource" => {
            for source in extra_volume_sources(map) {
                map.remove(source);
            }
        }
        "core.v1.PodSpec" => {
            for (list, i, field) in refused_whole(map) {
                if let Some(c) = map.get_mut(list).and_then(|l| l.get_mut(i)).and_then(Value::as_object_mut) {
                    c.remove(field);
                }
            }
        }
        _ => {}
    }
}

/// The longest message a cause carries: kube shows a refused value whole (a list, a spec), which a
/// body of megabytes would make an answer of megabytes per cause; the start tells what is wrong.
const MAX_MESSAGE: usize = 4096;

/// A cause added, unless `MAX_CAUSES` are there already: a check may find one per item of a list
/// the body sent, and what it reports must stay small whatever the list's length, and whatever the
/// length of each value it shows (`MAX_MESSAGE`).
fn push(causes: &mut Vec<Cause>, mut c: Cause) {
    if causes.len() >= MAX_CAUSES {
        return;
    }
    if cut(&mut c.message) {
        c.message.push_str("...");
    }
    causes.push(c);
}

/// `s` cut to `MAX_MESSAGE` bytes at a character's boundary; whether anything was cut.
fn cut(s: &mut String) -> bool {
    if s.len() <= MAX_MESSAGE {
        return false;
    }
    let end = (0..=MAX_MESSAGE).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
    s.truncate(end);
    true
}

fn duplicate(causes: &mut Vec<Cause>, at: &str, value: &str) {
    push(causes, cause("FieldValueDuplicate", at, format!("Duplicate value: {value:?}")));
}

/// A name that must be a DNS-1123 label.
fn dns_label(causes: &mut Vec<Cause>, at: String, name: &str) {
    for why in meta::dns1123_label_errors(name) {
        invalid(causes, at.clone(), format!("{name:?}"), &why);
    }
}

/// Exactly one of `kinds` set (a probe's or a hook's handler): the first kept, the others refused in
/// the struct's order; `what` names them in kube's words.
fn exactly_one(map: &Map<String, Value>, path: &Path, kinds: &[&str], what: &str, causes: &mut Vec<Cause>) {
    let mut set = kinds.iter().filter(|k| map.get(**k).is_some_and(|v| !v.is_null()));
    if set.next().is_none() {
        push(causes, cause("FieldValueRequired", &path.render(), format!("Required value: must specify a {what}")));
    }
    for extra in set {
        forbidden(causes, &path.child(extra), &format!("may not specify more than 1 {what}"));
    }
}

fn forbidden(causes: &mut Vec<Cause>, at: &str, why: &str) {
    push(causes, cause("FieldValueForbidden", at, format!("Forbidden: {why}")));
}

fn check(name: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    match name {
        "core.v1.PodSpec" => pod_spec(map, path, causes),
        "core.v1.Pod" => {
            pod_annotations(map, path, causes);
            ephemeral_claims(map, causes);
        }
        "core.v1.PodTemplateSpec" => {
            pod_annotations(map, path, causes);
            if !is_empty(map.get("spec").and_then(|s| s.get("ephemeralContainers"))) {
                let at = format!("{}.ephemeralContainers", path.child("spec"));
                forbidden(causes, &at, "ephemeral containers not allowed in pod template");
            }
        }
        // An ephemeral container's common fields, inline in it, are visited at its path.
        "core.v1.Container" | "core.v1.EphemeralContainerCommon" => container(map, path, causes),
        "core.v1.WindowsSecurityContextOptions" => windows_options(map, path, causes),
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
            push(causes, cause("FieldValueRequired", &at, "Required value: must have at least one node selector term"));
        }
        "core.v1.NodeSelectorRequirement" => node_selector_requirement(map, path, causes),
        "core.v1.PodAffinityTerm" => pod_affinity_term(map, path, causes),
        // kube checks neither a metric's selector nor a StatefulSet's claim templates' selectors.
        "k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector"
            if !path.has("metric") && !path.has("volumeClaimTemplates") =>
        {
            label_selector(map, path, causes)
        }
        "core.v1.WeightedPodAffinityTerm" | "core.v1.PreferredSchedulingTerm" => {
            if let Some(w) = map.get("weight").and_then(Value::as_i64).filter(|w| !(1..=100).contains(w)) {
                invalid(causes, path.child("weight"), w.to_string(), "must be in the range 1-100");
            }
        }
        "core.v1.TopologySpreadConstraint" => spread_constraint(map, path, causes),
        "core.v1.SeccompProfile" => seccomp_profile(map, path, causes),
        "core.v1.AppArmorProfile" => apparmor_profile(map, path, causes),
        "apps.v1.DeploymentStrategy" => deployment_strategy(map, path, causes),
        "apps.v1.DaemonSetUpdateStrategy" => daemonset_strategy(map, path, causes),
        "policy.v1.PodDisruptionBudgetSpec" => disruption_budget(map, path, causes),
        "autoscaling.v1.HorizontalPodAutoscalerSpec" | "autoscaling.v2.HorizontalPodAutoscalerSpec" => {
            autoscaler_spec(map, path, causes)
        }
        "autoscaling.v1.CrossVersionObjectReference" | "autoscaling.v2.CrossVersionObjectReference" => {
            object_reference(map, path, causes)
        }
        "autoscaling.v2.MetricSpec" => metric(map, path, causes),
        "autoscaling.v2.MetricIdentifier" => metric_identifier(map, path, causes),
        "autoscaling.v2.MetricTarget" => metric_target(map, path, causes),
        "autoscaling.v2.HPAScalingRules" => scaling_rules(map, path, causes),
        "networking.v1.NetworkPolicySpec" => policy_types(map, path, causes),
        "networking.v1.NetworkPolicyPort" => policy_port(map, path, causes),
        "networking.v1.NetworkPolicyPeer" => policy_peer(map, path, causes),
        "networking.v1.IPBlock" => ip_block(map, path, causes),
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
            file_mode(map, "defaultMode", path, causes);
            source(name, map, path, causes);
        }
        "core.v1.PersistentVolumeClaimVolumeSource" if is_empty(map.get("claimName")) => {
            required(causes, path.child("claimName"))
        }
        "core.v1.HostPathVolumeSource" => host_path(map, path, causes),
        "core.v1.LocalVolumeSource" => local(map, path, causes),
        "core.v1.NFSVolumeSource" => nfs(map, path, causes),
        "core.v1.CSIPersistentVolumeSource" => csi_volume_source(map, path, causes),
        "core.v1.KeyToPath" => key_to_path(map, path, causes),
        "core.v1.CSIVolumeSource" => csi_volume(map, path, causes),
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
        "core.v1.Toleration" => toleration(map, path, causes),
        _ => {
            source(name, map, path, causes);
            action(name, map, path, causes);
        }
    }
}

fn required(causes: &mut Vec<Cause>, at: String) {
    push(causes, cause("FieldValueRequired", &at, "Required value"));
}

/// `Required value: <why>`.
fn required_why(causes: &mut Vec<Cause>, at: &str, why: &str) {
    push(causes, cause("FieldValueRequired", at, format!("Required value: {why}")));
}

/// A list field's items (none when absent or not a list).
fn list<'a>(v: &'a Value, field: &str) -> &'a [Value] {
    v[field].as_array().map_or(&[][..], Vec::as_slice)
}

/// A string field (empty when absent or not a string).
fn text<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field].as_str().unwrap_or_default()
}

/// Go's `%#v` of a slice of `go_type`, as kube shows a list it refuses (`[]string{"a", "b"}`).
fn go_strings(go_type: &str, list: &[Value]) -> String {
    let items: Vec<String> = list.iter().map(shown).collect();
    format!("[]{go_type}{{{}}}", items.join(", "))
}

/// The causes `check` finds, placed under `prefix`: a struct-keyed check makes its paths along the
/// schema walk, and the kinds checked by their own fields call it outside one.
fn under(prefix: &str, causes: &mut Vec<Cause>, check: impl FnOnce(&mut Vec<Cause>)) {
    let mut found = Vec::new();
    check(&mut found);
    for mut c in found {
        c.field = if c.field.is_empty() { prefix.to_string() } else { format!("{prefix}.{}", c.field) };
        push(causes, c);
    }
}

fn invalid(causes: &mut Vec<Cause>, at: String, shown: String, why: &str) {
    if causes.len() >= MAX_CAUSES {
        return;
    }
    push(causes, cause("FieldValueInvalid", &at, format!("Invalid value: {shown}: {why}")));
}

/// Go's `%q` of a string, or the JSON of anything else.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => meta::go_quote(s),
        other => other.to_string(),
    }
}

fn not_supported(causes: &mut Vec<Cause>, at: String, value: &Value, supported: &[&str]) {
    if causes.len() >= MAX_CAUSES {
        return;
    }
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    let message = format!("Unsupported value: {}: supported values: {}", shown(value), list.join(", "));
    push(causes, cause("FieldValueNotSupported", &at, message));
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

/// The keys of a ConfigMap's or Secret's `field`: kube's `IsConfigMapKey`, each failing rule its own
/// error at `field[key]`.
fn config_keys(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
    for key in map.get(field).and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
        for why in config_key_problems(key) {
            invalid(causes, format!("{}[{key}]", path.child(field)), format!("{key:?}"), why);
        }
    }
}

/// What kube's `IsConfigMapKey` finds wrong with `key`, each rule in its words.
fn config_key_problems(key: &str) -> Vec<&'static str> {
    const PATTERN: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    let mut why = Vec::new();
    if key.len() > 253 {
        why.push("must be no more than 253 characters");
    }
    if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
        why.push(PATTERN);
    }
    match key {
        "." => why.push("must not be '.'"),
        ".." => why.push("must not be '..'"),
        k if k.starts_with("..") => why.push("must not start with '..'"),
        _ => {}
    }
    why
}

/// What the checks' unit tests share: a check's causes as `field: message` lines.
#[cfg(test)]
mod testing {
    use super::*;

    pub(super) fn lines(causes: Vec<Cause>) -> Vec<String> {
        causes.into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    /// The causes of a kind's own check of `obj`.
    pub(super) fn check(f: fn(&Value, &mut Vec<Cause>), obj: Value) -> Vec<String> {
        let mut causes = Vec::new();
        f(&obj, &mut causes);
        lines(causes)
    }

    /// The causes of a kind's update check from `old` to `new`.
    pub(super) fn update(f: fn(&Value, &Value, &mut Vec<Cause>), old: Value, new: Value) -> Vec<String> {
        let mut causes = Vec::new();
        f(&old, &new, &mut causes);
        lines(causes)
    }
}

#[cfg(test)]
mod tests;
