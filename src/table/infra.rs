//! Table columns of the kinds that describe a cluster's machinery rather than its workloads (nodes,
//! volumes, admission configuration, API priority, certificates), as kube-apiserver's printers
//! (`pkg/printers/internalversion`, kube-aggregator's APIService table) print them.

use chrono::{DateTime, Utc};
use serde_json::{json, Value};

use super::{age, age_col, arr, col, containers_images, format_labels, get, i, name, name_col, s};

/// One of the kinds this module prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Infra {
    Node,
    PersistentVolume,
    ReplicationController,
    PodTemplate,
    Csr,
    WebhookConfiguration,
    AdmissionPolicy,
    AdmissionPolicyBinding,
    ApiService,
    RuntimeClass,
    CsiDriver,
    CsiNode,
    CsiStorageCapacity,
    VolumeAttachment,
    FlowSchema,
    PriorityLevel,
    IpAddress,
    ServiceCidr,
    ComponentStatus,
}

impl Infra {
    /// The kind of a built-in resource, if this module prints it.
    pub(super) fn of(group: &str, plural: &str) -> Option<Infra> {
        Some(match (group, plural) {
            ("", "nodes") => Infra::Node,
            ("", "persistentvolumes") => Infra::PersistentVolume,
            ("", "replicationcontrollers") => Infra::ReplicationController,
            ("", "podtemplates") => Infra::PodTemplate,
            ("", "componentstatuses") => Infra::ComponentStatus,
            ("certificates.k8s.io", "certificatesigningrequests") => Infra::Csr,
            ("admissionregistration.k8s.io", "validatingwebhookconfigurations" | "mutatingwebhookconfigurations") => {
                Infra::WebhookConfiguration
            }
            ("admissionregistration.k8s.io", "validatingadmissionpolicies") => Infra::AdmissionPolicy,
            ("admissionregistration.k8s.io", "validatingadmissionpolicybindings") => Infra::AdmissionPolicyBinding,
            ("apiregistration.k8s.io", "apiservices") => Infra::ApiService,
            ("node.k8s.io", "runtimeclasses") => Infra::RuntimeClass,
            ("storage.k8s.io", "csidrivers") => Infra::CsiDriver,
            ("storage.k8s.io", "csinodes") => Infra::CsiNode,
            ("storage.k8s.io", "csistoragecapacities") => Infra::CsiStorageCapacity,
            ("storage.k8s.io", "volumeattachments") => Infra::VolumeAttachment,
            ("flowcontrol.apiserver.k8s.io", "flowschemas") => Infra::FlowSchema,
            ("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations") => Infra::PriorityLevel,
            ("networking.k8s.io", "ipaddresses") => Infra::IpAddress,
            ("networking.k8s.io", "servicecidrs") => Infra::ServiceCidr,
            _ => return None,
        })
    }

    /// Name first, then kube's columns in its order (priority 1: shown by `-o wide`).
    pub(super) fn columns(self) -> Vec<Value> {
        let c = |n: &str, ty: &str, d: &str| col(n, ty, d, 0);
        let wide = |n: &str, d: &str| col(n, "string", d, 1);
        let mut out = vec![name_col()];
        out.extend(match self {
            Infra::Node => vec![
                c("Status", "string", "The status of the node"),
                c("Roles", "string", "The roles of the node"),
                age_col(),
                c("Version", "string", "Kubelet Version reported by the node."),
                wide("Internal-IP", "List of addresses reachable to the node. Queried from cloud provider, if available."),
                wide("External-IP", "List of addresses reachable to the node. Queried from cloud provider, if available."),
                wide("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
                wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
                wide("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2)."),
            ],
            Infra::PersistentVolume => vec![
                c("Capacity", "string", "capacity is the description of the persistent volume's resources and capacity."),
                c("Access Modes", "string", "accessModes contains all ways the volume can be mounted."),
                c("Reclaim Policy", "string", "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim."),
                c("Status", "string", "phase indicates if a volume is available, bound to a claim, or released by a claim."),
                c("Claim", "string", "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim."),
                c("StorageClass", "string", "storageClassName is the name of StorageClass to which this persistent volume belongs."),
                c("VolumeAttributesClass", "string", "Name of VolumeAttributesClass to which this persistent volume belongs."),
                c("Reason", "string", "reason is a brief CamelCase string that describes any failure."),
                age_col(),
                wide("VolumeMode", "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state."),
            ],
            Infra::ReplicationController => vec![
                c("Desired", "integer", "Replicas is the number of desired replicas."),
                c("Current", "integer", "Replicas is the most recently observed number of replicas."),
                c("Ready", "integer", "The number of ready replicas for this replication controller."),
                age_col(),
                wide("Containers", "Names of each container in the template."),
                wide("Images", "Images referenced by each container in the template."),
                wide("Selector", "Selector is a label query over pods that should match the Replicas count."),
            ],
            Infra::PodTemplate => vec![
                c("Containers", "string", "Names of each container in the template."),
                c("Images", "string", "Images referenced by each container in the template."),
                c("Pod Labels", "string", "The labels for the pod template."),
            ],
            Infra::Csr => vec![
                age_col(),
                c("SignerName", "string", "Name of the signer the request asks to sign it."),
                c("Requestor", "string", "Name of the user who created the request."),
                c("RequestedDuration", "string", "The validity duration the request asks for."),
                c("Condition", "string", "Approval and issuance state of the request."),
            ],
            Infra::WebhookConfiguration => {
                vec![c("Webhooks", "integer", "Webhooks indicates the number of webhooks."), age_col()]
            }
            Infra::AdmissionPolicy => vec![
                c("Validations", "integer", "Validations indicates the number of validation rules."),
                c("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy."),
                age_col(),
            ],
            Infra::AdmissionPolicyBinding => vec![
                c("PolicyName", "string", "PolicyName indicates the name of the policy this binding is bound to."),
                c("ParamRef", "string", "ParamRef indicates the param resource this binding uses."),
                age_col(),
            ],
            Infra::ApiService => vec![
                c("Service", "string", "The reference to the service that hosts this API endpoint."),
                c("Available", "string", "Whether this service is available."),
                age_col(),
            ],
            Infra::RuntimeClass => vec![c("Handler", "string", "Handler names the underlying runtime."), age_col()],
            Infra::CsiDriver => vec![
                c("AttachRequired", "boolean", "Whether the driver needs an attach operation."),
                c("PodInfoOnMount", "boolean", "Whether the driver needs pod information at mount."),
                c("StorageCapacity", "boolean", "Whether the driver reports its storage capacity."),
                c("TokenRequests", "string", "Audiences of the ServiceAccount tokens the driver asks for."),
                c("RequiresRepublish", "boolean", "Whether NodePublishVolume is called periodically."),
                c("Modes", "string", "Volume modes the driver supports."),
                age_col(),
            ],
            Infra::CsiNode => vec![c("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the node"), age_col()],
            Infra::CsiStorageCapacity => vec![
                c("StorageClassName", "string", "The storage class the capacity applies to."),
                c("Capacity", "string", "The capacity reported by the driver."),
            ],
            Infra::VolumeAttachment => vec![
                json!({"name": "Attacher", "type": "string", "format": "name", "description": "Attacher indicates the name of the volume driver that MUST handle this request.", "priority": 0}),
                c("PV", "string", "Name of the persistent volume to attach."),
                c("Node", "string", "The node that the volume should be attached to."),
                c("Attached", "boolean", "Attached indicates the volume is successfully attached."),
                age_col(),
            ],
            Infra::FlowSchema => vec![
                c("PriorityLevel", "string", "The priority level this flow schema assigns its requests to."),
                c("MatchingPrecedence", "string", "The precedence of this flow schema among those that match."),
                c("DistinguisherMethod", "string", "How flows are told apart."),
                age_col(),
                c("MissingPL", "string", "Whether the priority level it names is missing."),
            ],
            Infra::PriorityLevel => vec![
                c("Type", "string", "Whether this priority level is limited or exempt."),
                c("NominalConcurrencyShares", "string", "Its share of the server's concurrency."),
                c("Queues", "string", "Number of queues."),
                c("HandSize", "string", "Queues a flow is dealt to."),
                c("QueueLengthLimit", "string", "The most requests a queue holds."),
                age_col(),
            ],
            // kube declares two columns for IPAddress and prints a third cell (its age).
            Infra::IpAddress => vec![c("ParentRef", "string", "ParentRef references the resource that an IPAddress is attached to.")],
            Infra::ServiceCidr => vec![c("CIDRs", "string", "CIDRs defines the IP blocks in CIDR notation."), age_col()],
            Infra::ComponentStatus => vec![
                c("Status", "string", "Status of the component conditions"),
                c("Message", "string", "Message of the component conditions"),
                c("Error", "string", "Error of the component conditions"),
            ],
        });
        out
    }

    /// One row's cells, in the order of `columns`.
    pub(super) fn cells(self, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
        let text = |v: &str, none: &str| json!(if v.is_empty() { none } else { v });
        let joined = |path: &[&str]| arr(obj, path).iter().filter_map(Value::as_str).collect::<Vec<_>>().join(",");
        let boolean = |path: &[&str], default: bool| json!(get(obj, path).and_then(Value::as_bool).unwrap_or(default));
        let mut out = vec![name(obj)];
        out.extend(match self {
            Infra::Node => node_cells(obj, now),
            Infra::PersistentVolume => {
                let claim = get(obj, &["spec", "claimRef"])
                    .filter(|c| c.is_object())
                    .map(|c| format!("{}/{}", s(c, &["namespace"]), s(c, &["name"])))
                    .unwrap_or_default();
                let phase = match get(obj, &["metadata", "deletionTimestamp"]) {
                    Some(_) => "Terminating",
                    None => s(obj, &["status", "phase"]),
                };
                vec![
                    json!(s(obj, &["spec", "capacity", "storage"])),
                    json!(super::access_modes_at(obj, &["spec", "accessModes"])),
                    json!(s(obj, &["spec", "persistentVolumeReclaimPolicy"])),
                    json!(phase),
                    json!(claim),
                    json!(s(obj, &["spec", "storageClassName"])),
                    text(s(obj, &["spec", "volumeAttributesClassName"]), "<unset>"),
                    json!(s(obj, &["status", "reason"])),
                    age(obj, now),
                    text(s(obj, &["spec", "volumeMode"]), "<unset>"),
                ]
            }
            Infra::ReplicationController => {
                let (containers, images) = containers_images(get(obj, &["spec", "template", "spec"]));
                vec![
                    json!(i(obj, &["spec", "replicas"])),
                    json!(i(obj, &["status", "replicas"])),
                    json!(i(obj, &["status", "readyReplicas"])),
                    age(obj, now),
                    json!(containers),
                    json!(images),
                    json!(format_labels(get(obj, &["spec", "selector"]))),
                ]
            }
            Infra::PodTemplate => {
                let (containers, images) = containers_images(get(obj, &["template", "spec"]));
                vec![
                    json!(containers),
                    json!(images),
                    json!(format_labels(get(obj, &["template", "metadata", "labels"]))),
                ]
            }
            Infra::Csr => {
                let requested = match get(obj, &["spec", "expirationSeconds"]).and_then(Value::as_i64) {
                    Some(secs) => super::human_duration(chrono::Duration::seconds(secs)),
                    None => "<none>".into(),
                };
                vec![
                    age(obj, now),
                    text(s(obj, &["spec", "signerName"]), "<none>"),
                    json!(s(obj, &["spec", "username"])),
                    json!(requested),
                    json!(csr_condition(obj)),
                ]
            }
            Infra::WebhookConfiguration => vec![json!(arr(obj, &["webhooks"]).len()), age(obj, now)],
            Infra::AdmissionPolicy => {
                let param = get(obj, &["spec", "paramKind"])
                    .filter(|p| p.is_object())
                    .map(|p| format!("{}/{}", s(p, &["apiVersion"]), s(p, &["kind"])))
                    .unwrap_or_else(|| "<unset>".into());
                vec![json!(arr(obj, &["spec", "validations"]).len()), json!(param), age(obj, now)]
            }
            Infra::AdmissionPolicyBinding => {
                let r = get(obj, &["spec", "paramRef"]).filter(|p| p.is_object());
                let param = match r {
                    Some(p) if !s(p, &["name"]).is_empty() => {
                        format!("{}/{}", text(s(p, &["namespace"]), "*").as_str().unwrap_or("*"), s(p, &["name"]))
                    }
                    Some(p) if get(p, &["selector"]).is_some_and(Value::is_object) => {
                        super::format_label_selector(get(p, &["selector"]))
                    }
                    _ => "<unset>".into(),
                };
                vec![json!(s(obj, &["spec", "policyName"])), json!(param), age(obj, now)]
            }
            Infra::ApiService => {
                let service = get(obj, &["spec", "service"])
                    .filter(|v| v.is_object())
                    .map(|v| format!("{}/{}", s(v, &["namespace"]), s(v, &["name"])))
                    .unwrap_or_else(|| "Local".into());
                let available = arr(obj, &["status", "conditions"])
                    .iter()
                    .find(|c| s(c, &["type"]) == "Available")
                    .map(|c| match s(c, &["reason"]) {
                        "" => s(c, &["status"]).to_string(),
                        reason => format!("{} ({reason})", s(c, &["status"])),
                    })
                    .unwrap_or_else(|| "Unknown".into());
                vec![json!(service), json!(available), age(obj, now)]
            }
            Infra::RuntimeClass => vec![json!(s(obj, &["handler"])), age(obj, now)],
            Infra::CsiDriver => {
                let tokens = match get(obj, &["spec", "tokenRequests"]) {
                    Some(Value::Array(t)) => t.iter().map(|r| s(r, &["audience"])).collect::<Vec<_>>().join(","),
                    _ => "<unset>".into(),
                };
                vec![
                    boolean(&["spec", "attachRequired"], true),
                    boolean(&["spec", "podInfoOnMount"], false),
                    boolean(&["spec", "storageCapacity"], false),
                    json!(tokens),
                    boolean(&["spec", "requiresRepublish"], false),
                    text(&joined(&["spec", "volumeLifecycleModes"]), "<none>"),
                    age(obj, now),
                ]
            }
            Infra::CsiNode => vec![json!(arr(obj, &["spec", "drivers"]).len()), age(obj, now)],
            Infra::CsiStorageCapacity => {
                vec![json!(s(obj, &["storageClassName"])), text(s(obj, &["capacity"]), "<unset>")]
            }
            Infra::VolumeAttachment => vec![
                json!(s(obj, &["spec", "attacher"])),
                json!(s(obj, &["spec", "source", "persistentVolumeName"])),
                json!(s(obj, &["spec", "nodeName"])),
                boolean(&["status", "attached"], false),
                age(obj, now),
            ],
            Infra::FlowSchema => {
                let missing = arr(obj, &["status", "conditions"])
                    .iter()
                    .find(|c| s(c, &["type"]) == "Dangling")
                    .map_or("?", |c| s(c, &["status"]));
                vec![
                    json!(s(obj, &["spec", "priorityLevelConfiguration", "name"])),
                    json!(i(obj, &["spec", "matchingPrecedence"])),
                    text(s(obj, &["spec", "distinguisherMethod", "type"]), "<none>"),
                    age(obj, now),
                    json!(missing),
                ]
            }
            Infra::PriorityLevel => {
                let limited = get(obj, &["spec", "limited"]).filter(|l| l.is_object());
                let queuing = limited.and_then(|l| get(l, &["limitResponse", "queuing"])).filter(|q| q.is_object());
                let num = |v: Option<&Value>, path: &[&str]| match v {
                    Some(v) => json!(i(v, path)),
                    None => json!("<none>"),
                };
                vec![
                    json!(s(obj, &["spec", "type"])),
                    num(limited, &["nominalConcurrencyShares"]),
                    num(queuing, &["queues"]),
                    num(queuing, &["handSize"]),
                    num(queuing, &["queueLengthLimit"]),
                    age(obj, now),
                ]
            }
            Infra::IpAddress => {
                let parent = get(obj, &["spec", "parentRef"]).filter(|p| p.is_object()).map_or_else(
                    || "<none>".to_string(),
                    |p| {
                        let mut r = s(p, &["resource"]).to_lowercase();
                        if !s(p, &["group"]).is_empty() {
                            r = format!("{r}.{}", s(p, &["group"]).to_lowercase());
                        }
                        if !s(p, &["namespace"]).is_empty() {
                            r = format!("{r}/{}", s(p, &["namespace"]));
                        }
                        format!("{r}/{}", s(p, &["name"]))
                    },
                );
                vec![json!(parent), age(obj, now)]
            }
            Infra::ServiceCidr => vec![json!(joined(&["spec", "cidrs"])), age(obj, now)],
            Infra::ComponentStatus => match arr(obj, &["conditions"]).iter().find(|c| s(c, &["type"]) == "Healthy") {
                Some(c) => vec![
                    json!(if s(c, &["status"]) == "True" { "Healthy" } else { "Unhealthy" }),
                    json!(s(c, &["message"])),
                    json!(s(c, &["error"])),
                ],
                None => vec![json!("Unknown"), json!(""), json!("")],
            },
        });
        out
    }
}

/// Status, Roles, Age, Version and the wide columns of a Node.
fn node_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut status = match arr(obj, &["status", "conditions"]).iter().find(|c| s(c, &["type"]) == "Ready") {
        Some(c) if s(c, &["status"]) == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if get(obj, &["spec", "unschedulable"]).and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles = std::collections::BTreeSet::new();
    for (k, v) in get(obj, &["metadata", "labels"]).and_then(Value::as_object).into_iter().flatten() {
        if let Some(role) = k.strip_prefix("node-role.kubernetes.io/").filter(|r| !r.is_empty()) {
            roles.insert(role.to_string());
        }
        if k == "kubernetes.io/role" {
            if let Some(role) = v.as_str().filter(|r| !r.is_empty()) {
                roles.insert(role.to_string());
            }
        }
    }
    let roles = if roles.is_empty() { "<none>".to_string() } else { roles.into_iter().collect::<Vec<_>>().join(",") };
    let address = |ty: &str| {
        arr(obj, &["status", "addresses"])
            .iter()
            .find(|a| s(a, &["type"]) == ty)
            .map_or_else(|| "<none>".to_string(), |a| s(a, &["address"]).to_string())
    };
    let info = |f: &str| match s(obj, &["status", "nodeInfo", f]) {
        "" => "<unknown>".to_string(),
        v => v.to_string(),
    };
    vec![
        json!(status),
        json!(roles),
        age(obj, now),
        json!(s(obj, &["status", "nodeInfo", "kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

/// `Denied`, `Approved` or `Pending`, then `,Failed` and `,Issued` where they apply.
fn csr_condition(obj: &Value) -> String {
    let conditions = arr(obj, &["status", "conditions"]);
    let has = |ty: &str| conditions.iter().any(|c| s(c, &["type"]) == ty);
    let mut out = if has("Denied") {
        "Denied"
    } else if has("Approved") {
        "Approved"
    } else {
        "Pending"
    }
    .to_string();
    if has("Failed") {
        out.push_str(",Failed");
    }
    if !s(obj, &["status", "certificate"]).is_empty() {
        out.push_str(",Issued");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_row_has_a_cell_per_column_except_ipaddress_as_in_kube() {
        let kinds = [
            Infra::Node,
            Infra::PersistentVolume,
            Infra::ReplicationController,
            Infra::PodTemplate,
            Infra::Csr,
            Infra::WebhookConfiguration,
            Infra::AdmissionPolicy,
            Infra::AdmissionPolicyBinding,
            Infra::ApiService,
            Infra::RuntimeClass,
            Infra::CsiDriver,
            Infra::CsiNode,
            Infra::CsiStorageCapacity,
            Infra::VolumeAttachment,
            Infra::FlowSchema,
            Infra::PriorityLevel,
            Infra::ServiceCidr,
            Infra::ComponentStatus,
        ];
        let obj = json!({"metadata": {"name": "x", "creationTimestamp": "2026-01-01T00:00:00Z"}});
        for k in kinds {
            assert_eq!(k.cells(&obj, Utc::now()).len(), k.columns().len(), "{k:?}");
        }
        assert_eq!(Infra::IpAddress.cells(&obj, Utc::now()).len(), Infra::IpAddress.columns().len() + 1);
    }

    #[test]
    fn nodes_csrs_and_bindings_print_as_kube() {
        let node = json!({"metadata": {"name": "n1", "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "edge"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}]}});
        let cells = Infra::Node.cells(&node, Utc::now());
        assert_eq!(cells[1..3], [json!("Ready,SchedulingDisabled"), json!("control-plane,edge")]);
        assert_eq!((&cells[4], &cells[5], &cells[6]), (&json!("v1.33.0"), &json!("10.0.0.5"), &json!("<none>")));
        let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "s", "username": "u", "expirationSeconds": 3600},
            "status": {"conditions": [{"type": "Approved"}], "certificate": "Zm9v"}});
        let cells = Infra::Csr.cells(&csr, Utc::now());
        assert_eq!(cells[4..6], [json!("60m"), json!("Approved,Issued")]);
        let binding = json!({"metadata": {"name": "b"}, "spec": {"policyName": "p", "paramRef": {"name": "cfg"}}});
        assert_eq!(Infra::AdmissionPolicyBinding.cells(&binding, Utc::now())[2], "*/cfg");
    }
}
