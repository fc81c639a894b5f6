//! Server-side `meta.k8s.io/v1` Table conversion for `kubectl get`, modelled on kube-apiserver's
//! printers (pkg/printers/internalversion) and the CRD table convertor (additionalPrinterColumns).
//!
//! kube-apiserver always renders the wide cell set; kubectl hides `priority > 0` columns itself.
//! Objects here are mostly not reconciled by controllers, so absent status prints what kube prints
//! for a freshly created object (e.g. deployment READY `0/3`, pod STATUS `Pending`).

use chrono::{DateTime, Utc};
use serde_json::{json, Map, Value};

mod infra;

/// What `rows[].object` carries (`?includeObject=`); the default is `Metadata`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object in rows.
    None,
    /// A `PartialObjectMetadata` holding the object's metadata.
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value; unknown values fall back to the default.
    pub fn from_query(v: Option<&str>) -> Self {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATED_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const CONTAINERS_DESC: &str = "Names of each container in the template.";
const IMAGES_DESC: &str = "Images referenced by each container in the template.";
const SELECTOR_DESC: &str = "A label query over pods that should match the replica count. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

/// Bytes as a quantity in binary units, rounded down (`1536` is `1Ki`), as `kubectl top` shows memory.
fn binary_size(bytes: u64) -> String {
    let units = ["", "Ki", "Mi", "Gi", "Ti", "Pi"];
    let (mut n, mut unit) = (bytes, 0);
    while n >= 1024 && unit + 1 < units.len() {
        n /= 1024;
        unit += 1;
    }
    format!("{n}{}", units[unit])
}

fn col(name: &str, ty: &str, desc: &str, priority: i64) -> Value {
    json!({"name": name, "type": ty, "format": "", "description": desc, "priority": priority})
}

fn name_col() -> Value {
    json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0})
}

fn age_col() -> Value {
    col("Age", "string", CREATED_DESC, 0)
}

/// Which printer a resource uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Namespace,
    ConfigMap,
    Secret,
    ServiceAccount,
    Service,
    Event,
    EventV1,
    Pod,
    Pvc,
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    Ingress,
    NetworkPolicy,
    Hpa,
    Pdb,
    Lease,
    Role,
    RoleBinding,
    ClusterRoleBinding,
    Crd,
    ResourceQuota,
    LimitRange,
    Endpoints,
    EndpointSlice,
    ControllerRevision,
    IngressClass,
    PriorityClass,
    StorageClass,
    LogicalCluster,
    Default,
}

fn kind_of(group: &str, plural: &str) -> Kind {
    match (group, plural) {
        ("", "namespaces") => Kind::Namespace,
        ("", "configmaps") => Kind::ConfigMap,
        ("", "secrets") => Kind::Secret,
        ("", "serviceaccounts") => Kind::ServiceAccount,
        ("", "services") => Kind::Service,
        ("", "events") => Kind::Event,
        ("events.k8s.io", "events") => Kind::EventV1,
        ("", "pods") => Kind::Pod,
        ("", "persistentvolumeclaims") => Kind::Pvc,
        ("apps", "deployments") => Kind::Deployment,
        ("apps", "replicasets") => Kind::ReplicaSet,
        ("apps", "statefulsets") => Kind::StatefulSet,
        ("apps", "daemonsets") => Kind::DaemonSet,
        ("batch", "jobs") => Kind::Job,
        ("batch", "cronjobs") => Kind::CronJob,
        ("networking.k8s.io", "ingresses") => Kind::Ingress,
        ("networking.k8s.io", "networkpolicies") => Kind::NetworkPolicy,
        ("autoscaling", "horizontalpodautoscalers") => Kind::Hpa,
        ("policy", "poddisruptionbudgets") => Kind::Pdb,
        ("coordination.k8s.io", "leases") => Kind::Lease,
        ("rbac.authorization.k8s.io", "roles" | "clusterroles") => Kind::Role,
        ("rbac.authorization.k8s.io", "rolebindings") => Kind::RoleBinding,
        ("rbac.authorization.k8s.io", "clusterrolebindings") => Kind::ClusterRoleBinding,
        ("apiextensions.k8s.io", "customresourcedefinitions") => Kind::Crd,
        ("", "resourcequotas") => Kind::ResourceQuota,
        ("", "limitranges") => Kind::LimitRange,
        ("", "endpoints") => Kind::Endpoints,
        ("discovery.k8s.io", "endpointslices") => Kind::EndpointSlice,
        ("apps", "controllerrevisions") => Kind::ControllerRevision,
        ("networking.k8s.io", "ingressclasses") => Kind::IngressClass,
        ("scheduling.k8s.io", "priorityclasses") => Kind::PriorityClass,
        ("storage.k8s.io", "storageclasses") => Kind::StorageClass,
        ("tenancy.kgate.dev", "logicalclusters") => Kind::LogicalCluster,
        _ => Kind::Default,
    }
}

fn binding_cols(what: &str) -> Vec<Value> {
    vec![
        name_col(),
        col(
            "Role",
            "string",
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error. This field is immutable.",
            0,
        ),
        age_col(),
        col("Users", "string", &format!("Users in the {what}"), 1),
        col("Groups", "string", &format!("Groups in the {what}"), 1),
        col(
            "ServiceAccounts",
            "string",
            &format!("ServiceAccounts in the {what}"),
            1,
        ),
    ]
}

/// Columns for a built-in resource (`group` "" for core): Name first, then the columns
/// kube-apiserver prints, with name/type/format/description/priority as there.
/// Unknown resources get Name + Age (a `date` column, as for custom resources).
pub fn column_definitions(group: &str, plural: &str) -> Vec<Value> {
    if let Some(kind) = infra::Infra::of(group, plural) {
        return kind.columns();
    }
    let wide = |n: &str, d: &str| col(n, "string", d, 1);
    match kind_of(group, plural) {
        Kind::Namespace => vec![
            name_col(),
            col("Status", "string", "The status of the namespace", 0),
            age_col(),
        ],
        Kind::ConfigMap => vec![
            name_col(),
            col(
                "Data",
                "string",
                "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
                0,
            ),
            age_col(),
        ],
        Kind::Secret => vec![
            name_col(),
            col(
                "Type",
                "string",
                "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
                0,
            ),
            col(
                "Data",
                "string",
                "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
                0,
            ),
            age_col(),
        ],
        Kind::ServiceAccount => vec![
            name_col(),
            col(
                "Secrets",
                "string",
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret",
                0,
            ),
            age_col(),
        ],
        Kind::Service => vec![
            name_col(),
            col(
                "Type",
                "string",
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
                0,
            ),
            col(
                "Cluster-IP",
                "string",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
                0,
            ),
            col(
                "External-IP",
                "string",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
                0,
            ),
            col(
                "Port(s)",
                "string",
                "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
                0,
            ),
            age_col(),
            wide(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
            ),
        ],
        Kind::Event | Kind::EventV1 => vec![
            col(
                "Last Seen",
                "string",
                "The time at which the most recent occurrence of this event was recorded.",
                0,
            ),
            col(
                "Type",
                "string",
                "Type of this event (Normal, Warning), new types could be added in the future",
                0,
            ),
            col(
                "Reason",
                "string",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                0,
            ),
            col(
                "Object",
                "string",
                "The object that this event is about.",
                0,
            ),
            wide(
                "Subobject",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
            ),
            wide(
                "Source",
                "The component reporting this event. Should be a short machine understandable string.",
            ),
            col(
                "Message",
                "string",
                "A human-readable description of the status of this operation.",
                0,
            ),
            wide(
                "First Seen",
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            ),
            wide("Count", "The number of times this event has occurred."),
            json!({"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 1}),
        ],
        Kind::Pod => vec![
            name_col(),
            col(
                "Ready",
                "string",
                "The aggregate readiness state of this pod for accepting traffic.",
                0,
            ),
            col(
                "Status",
                "string",
                "The aggregate status of the containers in this pod.",
                0,
            ),
            col(
                "Restarts",
                "string",
                "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                0,
            ),
            age_col(),
            wide(
                "IP",
                "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
            ),
            wide(
                "Node",
                "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName.",
            ),
            wide(
                "Nominated Node",
                "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods.",
            ),
            wide(
                "Readiness Gates",
                "If specified, all readiness gates will be evaluated for pod readiness. More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
            ),
        ],
        Kind::Pvc => vec![
            name_col(),
            col(
                "Status",
                "string",
                "phase represents the current phase of PersistentVolumeClaim.",
                0,
            ),
            col(
                "Volume",
                "string",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
                0,
            ),
            col(
                "Capacity",
                "string",
                "capacity represents the actual resources of the underlying volume.",
                0,
            ),
            col(
                "Access Modes",
                "string",
                "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
                0,
            ),
            col("StorageClass", "string", "StorageClass of the pvc", 0),
            col(
                "VolumeAttributesClass",
                "string",
                "VolumeAttributesClass of the pvc",
                0,
            ),
            age_col(),
            wide(
                "VolumeMode",
                "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
            ),
        ],
        Kind::Deployment => vec![
            name_col(),
            col("Ready", "string", "Number of the pod with ready state", 0),
            col(
                "Up-to-date",
                "integer",
                "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
                0,
            ),
            col(
                "Available",
                "integer",
                "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
                0,
            ),
            age_col(),
            wide("Containers", CONTAINERS_DESC),
            wide("Images", IMAGES_DESC),
            wide(
                "Selector",
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment. It must match the pod template's labels.",
            ),
        ],
        Kind::ReplicaSet => vec![
            name_col(),
            col(
                "Desired",
                "integer",
                "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#how-a-replicaset-works",
                0,
            ),
            col(
                "Current",
                "integer",
                "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset/#how-a-replicaset-works",
                0,
            ),
            col(
                "Ready",
                "integer",
                "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
                0,
            ),
            age_col(),
            wide("Containers", CONTAINERS_DESC),
            wide("Images", IMAGES_DESC),
            wide("Selector", SELECTOR_DESC),
        ],
        Kind::StatefulSet => vec![
            name_col(),
            col("Ready", "string", "Number of the pod with ready state", 0),
            age_col(),
            wide("Containers", CONTAINERS_DESC),
            wide("Images", IMAGES_DESC),
        ],
        Kind::DaemonSet => vec![
            name_col(),
            col(
                "Desired",
                "integer",
                "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
                0,
            ),
            col(
                "Current",
                "integer",
                "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
                0,
            ),
            col(
                "Ready",
                "integer",
                "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
                0,
            ),
            col(
                "Up-to-date",
                "integer",
                "The total number of nodes that are running updated daemon pod",
                0,
            ),
            col(
                "Available",
                "integer",
                "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
                0,
            ),
            col(
                "Node Selector",
                "string",
                "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
                0,
            ),
            age_col(),
            wide("Containers", CONTAINERS_DESC),
            wide("Images", IMAGES_DESC),
            wide(
                "Selector",
                "A label query over pods that are managed by the daemon set. Must match in order to be controlled. It must match the pod template's labels. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ],
        Kind::Job => vec![
            name_col(),
            col("Status", "string", "Status of the job.", 0),
            col(
                "Completions",
                "string",
                "The completion status of the job. For example: 1/1",
                0,
            ),
            col(
                "Duration",
                "string",
                "Time required to complete the job.",
                0,
            ),
            age_col(),
            wide("Containers", CONTAINERS_DESC),
            wide("Images", IMAGES_DESC),
            wide(
                "Selector",
                "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ],
        Kind::CronJob => vec![
            name_col(),
            col(
                "Schedule",
                "string",
                "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
                0,
            ),
            col(
                "Timezone",
                "string",
                "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones.",
                0,
            ),
            col(
                "Suspend",
                "boolean",
                "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
                0,
            ),
            col(
                "Active",
                "integer",
                "A list of pointers to currently running jobs.",
                0,
            ),
            col(
                "Last Schedule",
                "string",
                "Information when was the last time the job was successfully scheduled.",
                0,
            ),
            age_col(),
            wide("Containers", CONTAINERS_DESC),
            wide("Images", IMAGES_DESC),
            wide(
                "Selector",
                "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
            ),
        ],
        Kind::Ingress => vec![
            name_col(),
            col(
                "Class",
                "string",
                "The name of the IngressClass resource that should be used",
                0,
            ),
            col(
                "Hosts",
                "string",
                "Hosts that incoming requests are matched against before the ingress rule",
                0,
            ),
            col(
                "Address",
                "string",
                "Address is a list containing ingress points for the load-balancer",
                0,
            ),
            col(
                "Ports",
                "string",
                "Ports of TLS configurations that open",
                0,
            ),
            age_col(),
        ],
        Kind::NetworkPolicy => vec![
            name_col(),
            col(
                "Pod-Selector",
                "string",
                "podSelector selects the pods to which this NetworkPolicy object applies. The array of rules is applied to any pods selected by this field. An empty selector matches all pods in the policy's namespace.",
                0,
            ),
            age_col(),
        ],
        Kind::Hpa => vec![
            name_col(),
            col(
                "Reference",
                "string",
                "reference to scaled resource; horizontal pod autoscaler will learn the current resource consumption and will set the desired number of pods by using its Scale subresource.",
                0,
            ),
            col(
                "Targets",
                "string",
                "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).",
                0,
            ),
            col(
                "MinPods",
                "string",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.",
                0,
            ),
            col(
                "MaxPods",
                "integer",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
                0,
            ),
            col(
                "Replicas",
                "integer",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
                0,
            ),
            age_col(),
        ],
        Kind::Pdb => vec![
            name_col(),
            col(
                "Min Available",
                "string",
                "The minimum number of pods that must be available.",
                0,
            ),
            col(
                "Max Unavailable",
                "string",
                "The maximum number of pods that may be unavailable.",
                0,
            ),
            col(
                "Allowed Disruptions",
                "integer",
                "Calculated number of pods that may be disrupted at this time.",
                0,
            ),
            age_col(),
        ],
        Kind::Lease => vec![
            name_col(),
            col(
                "Holder",
                "string",
                "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
                0,
            ),
            age_col(),
        ],
        Kind::Role | Kind::Crd | Kind::LimitRange => vec![name_col(), col("Created At", "date", CREATED_DESC, 0)],
        Kind::ResourceQuota => vec![
            name_col(),
            age_col(),
            col("Request", "string", "Request represents a minimum amount of cpu/memory that a container may consume.", 0),
            col(
                "Limit",
                "string",
                "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
                0,
            ),
        ],
        Kind::Endpoints => vec![
            name_col(),
            col(
                "Endpoints",
                "string",
                "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
                0,
            ),
            age_col(),
        ],
        Kind::EndpointSlice => vec![
            name_col(),
            col(
                "AddressType",
                "string",
                "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, and kube-proxy only processes, slices of addressType \"IPv4\" and \"IPv6\". No semantics are defined for the \"FQDN\" type.",
                0,
            ),
            col(
                "Ports",
                "string",
                "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. Each slice may include a maximum of 100 ports. Services always have at least 1 port, so EndpointSlices generated by the EndpointSlice controller will likewise always have at least 1 port. EndpointSlices used for other purposes may have an empty ports list.",
                0,
            ),
            col(
                "Endpoints",
                "string",
                "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
                0,
            ),
            age_col(),
        ],
        Kind::ControllerRevision => vec![
            name_col(),
            col("Controller", "string", "Controller of the object", 0),
            col("Revision", "string", "Revision indicates the revision of the state represented by Data.", 0),
            age_col(),
        ],
        Kind::IngressClass => vec![
            name_col(),
            col(
                "Controller",
                "string",
                "controller refers to the name of the controller that should handle this class. This allows for different \"flavors\" that are controlled by the same controller. For example, you may have different parameters for the same implementing controller. This should be specified as a domain-prefixed path no more than 250 characters in length, e.g. \"acme.io/ingress-controller\". This field is immutable.",
                0,
            ),
            col(
                "Parameters",
                "string",
                "parameters is a link to a custom resource containing additional configuration for the controller. This is optional if the controller does not require extra parameters.",
                0,
            ),
            age_col(),
        ],
        Kind::PriorityClass => vec![
            name_col(),
            col(
                "Value",
                "integer",
                "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
                0,
            ),
            col(
                "Global-Default",
                "boolean",
                "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
                0,
            ),
            age_col(),
            col(
                "PreemptionPolicy",
                "string",
                "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
                0,
            ),
        ],
        Kind::StorageClass => vec![
            name_col(),
            col("Provisioner", "string", "provisioner indicates the type of the provisioner.", 0),
            col(
                "ReclaimPolicy",
                "string",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
                0,
            ),
            col(
                "VolumeBindingMode",
                "string",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
                0,
            ),
            col(
                "AllowVolumeExpansion",
                "string",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
                0,
            ),
            age_col(),
        ],
        Kind::RoleBinding => binding_cols("roleBinding"),
        Kind::ClusterRoleBinding => binding_cols("clusterRoleBinding"),
        Kind::LogicalCluster => vec![
            name_col(),
            col("Phase", "string", "Phase of the logical cluster.", 0),
            col("Objects", "integer", "Objects the cluster holds.", 0),
            col("Storage", "string", "Bytes its objects take in the store.", 0),
            col("Namespaces", "integer", "Namespaces the cluster holds.", 0),
            col("Age", "date", CREATED_DESC, 0),
            col("Shard", "string", "The shard (etcd cluster) the cluster's objects live on.", 1),
        ],
        Kind::Default => vec![name_col(), col("Age", "date", CREATED_DESC, 0)],
    }
}

// ---- small JSON helpers -------------------------------------------------------------------

fn get<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, k| v.get(*k))
}

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    get(v, path).and_then(Value::as_str).unwrap_or("")
}

fn i(v: &Value, path: &[&str]) -> i64 {
    get(v, path).and_then(Value::as_i64).unwrap_or(0)
}

fn arr<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    get(v, path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn obj_len(v: &Value, path: &[&str]) -> usize {
    get(v, path).and_then(Value::as_object).map_or(0, Map::len)
}

fn parse_time(t: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(t).ok().map(|d| d.with_timezone(&Utc))
}

fn time_at(v: &Value, path: &[&str]) -> Option<DateTime<Utc>> {
    parse_time(s(v, path))
}

/// kube's translateTimestampSince: `<unknown>` for a missing timestamp.
fn since(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> String {
    match t {
        Some(t) => human_duration(now - t),
        None => "<unknown>".to_string(),
    }
}

fn age(obj: &Value, now: DateTime<Utc>) -> Value {
    Value::String(since(time_at(obj, &["metadata", "creationTimestamp"]), now))
}

fn name(obj: &Value) -> Value {
    Value::String(s(obj, &["metadata", "name"]).to_string())
}

/// labels.FormatLabels: sorted `k=v` pairs, `<none>` when empty.
fn format_labels(m: Option<&Value>) -> String {
    let Some(m) = m.and_then(Value::as_object) else {
        return "<none>".into();
    };
    let mut pairs: Vec<String> = m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// metav1.FormatLabelSelector: requirements sorted by key, `<none>` when it selects everything.
fn format_label_selector(sel: Option<&Value>) -> String {
    let Some(sel) = sel.filter(|v| v.is_object()) else {
        // A nil selector selects nothing; Go prints its empty String() as "<none>" too.
        return "<none>".into();
    };
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel.get("matchLabels").and_then(Value::as_object) {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", v.as_str().unwrap_or_default())));
        }
    }
    for e in arr(sel, &["matchExpressions"]) {
        let key = s(e, &["key"]).to_string();
        let mut vals: Vec<&str> = arr(e, &["values"]).iter().filter_map(Value::as_str).collect();
        vals.sort_unstable();
        vals.dedup();
        let text = match s(e, &["operator"]) {
            "In" => format!("{key} in ({})", vals.join(",")),
            "NotIn" => format!("{key} notin ({})", vals.join(",")),
            "Exists" => key.clone(),
            "DoesNotExist" => format!("!{key}"),
            _ => return "<error>".into(),
        };
        reqs.push((key, text));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    if reqs.is_empty() {
        return "<none>".into();
    }
    reqs.into_iter().map(|r| r.1).collect::<Vec<_>>().join(",")
}

fn containers_images(pod_spec: Option<&Value>) -> (String, String) {
    let cs = pod_spec.map_or(&[][..], |p| arr(p, &["containers"]));
    let names: Vec<&str> = cs.iter().map(|c| s(c, &["name"])).collect();
    let images: Vec<&str> = cs.iter().map(|c| s(c, &["image"])).collect();
    (names.join(","), images.join(","))
}

/// loadBalancerStatusStringer in wide mode: ingress IPs or hostnames, comma-joined.
fn lb_ingress(obj: &Value, path: &[&str]) -> String {
    arr(obj, path)
        .iter()
        .filter_map(|i| {
            let ip = s(i, &["ip"]);
            let host = s(i, &["hostname"]);
            if !ip.is_empty() {
                Some(ip)
            } else if !host.is_empty() {
                Some(host)
            } else {
                None
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn int_or_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn has_condition(obj: &Value, ty: &str) -> bool {
    arr(obj, &["status", "conditions"]).iter().any(|c| s(c, &["type"]) == ty && s(c, &["status"]) == "True")
}

// ---- per-type cells -----------------------------------------------------------------------

fn pod_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let spec_containers = arr(obj, &["spec", "containers"]);
    let spec_inits = arr(obj, &["spec", "initContainers"]);
    let is_sidecar =
        |name: &str| spec_inits.iter().any(|c| s(c, &["name"]) == name && s(c, &["restartPolicy"]) == "Always");
    let sidecars = spec_inits.iter().filter(|c| s(c, &["restartPolicy"]) == "Always").count();
    let total = spec_containers.len() + sidecars;
    let mut ready = 0usize;
    let mut restarts = 0i64;
    let mut sidecar_restarts = 0i64;
    let mut last_restart: Option<DateTime<Utc>> = None;
    let mut note_restart = |cs: &Value| {
        if let Some(t) = time_at(cs, &["lastState", "terminated", "finishedAt"]) {
            last_restart = Some(last_restart.map_or(t, |l| l.max(t)));
        }
    };

    let phase = s(obj, &["status", "phase"]);
    // A pod the API server accepted starts Pending; nothing here runs it further.
    let mut reason = if phase.is_empty() { "Pending" } else { phase }.to_string();
    let status_reason = s(obj, &["status", "reason"]);
    if !status_reason.is_empty() {
        reason = status_reason.to_string();
    }
    if arr(obj, &["status", "conditions"])
        .iter()
        .any(|c| s(c, &["type"]) == "PodScheduled" && s(c, &["reason"]) == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }

    let mut initializing = false;
    let init_statuses = arr(obj, &["status", "initContainerStatuses"]);
    for (idx, cs) in init_statuses.iter().enumerate() {
        let cname = s(cs, &["name"]);
        let rc = i(cs, &["restartCount"]);
        restarts += rc;
        note_restart(cs);
        let sidecar = is_sidecar(cname);
        let started = get(cs, &["started"]).and_then(Value::as_bool) == Some(true);
        if sidecar {
            sidecar_restarts += rc;
            if started && get(cs, &["ready"]).and_then(Value::as_bool) == Some(true) {
                ready += 1;
            }
        }
        let term = get(cs, &["state", "terminated"]);
        let waiting_reason = s(cs, &["state", "waiting", "reason"]);
        if term.is_some_and(|t| i(t, &["exitCode"]) == 0) || (sidecar && started) {
            continue;
        }
        if let Some(t) = term {
            let r = s(t, &["reason"]);
            reason = if !r.is_empty() {
                format!("Init:{r}")
            } else if i(t, &["signal"]) != 0 {
                format!("Init:Signal:{}", i(t, &["signal"]))
            } else {
                format!("Init:ExitCode:{}", i(t, &["exitCode"]))
            };
        } else if !waiting_reason.is_empty() && waiting_reason != "PodInitializing" {
            reason = format!("Init:{waiting_reason}");
        } else {
            reason = format!("Init:{idx}/{}", spec_inits.len());
        }
        initializing = true;
        break;
    }

    if !initializing || has_condition(obj, "Initialized") {
        restarts = sidecar_restarts;
        let mut has_running = false;
        for cs in arr(obj, &["status", "containerStatuses"]).iter().rev() {
            restarts += i(cs, &["restartCount"]);
            note_restart(cs);
            let waiting = s(cs, &["state", "waiting", "reason"]);
            let term = get(cs, &["state", "terminated"]);
            if !waiting.is_empty() {
                reason = waiting.to_string();
            } else if let Some(t) = term {
                let r = s(t, &["reason"]);
                reason = if !r.is_empty() {
                    r.to_string()
                } else if i(t, &["signal"]) != 0 {
                    format!("Signal:{}", i(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", i(t, &["exitCode"]))
                };
            } else if get(cs, &["ready"]).and_then(Value::as_bool) == Some(true)
                && get(cs, &["state", "running"]).is_some()
            {
                has_running = true;
                ready += 1;
            }
        }
        if reason == "Completed" && has_running {
            reason = if has_condition(obj, "Ready") { "Running".into() } else { "NotReady".into() };
        }
    }

    if get(obj, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        if status_reason == "NodeLost" {
            reason = "Unknown".into();
        } else if phase != "Failed" && phase != "Succeeded" {
            reason = "Terminating".into();
        }
    }

    let restarts_text = match last_restart {
        Some(t) if restarts != 0 => format!("{restarts} ({} ago)", since(Some(t), now)),
        _ => restarts.to_string(),
    };
    let or_none = |v: &str| {
        if v.is_empty() {
            "<none>".to_string()
        } else {
            v.to_string()
        }
    };
    let mut ip = s(obj, &["status", "podIP"]);
    if ip.is_empty() {
        ip = obj.pointer("/status/podIPs/0/ip").and_then(Value::as_str).unwrap_or("");
    }
    let gates = arr(obj, &["spec", "readinessGates"]);
    let gates_text = if gates.is_empty() {
        "<none>".to_string()
    } else {
        let ok = gates.iter().filter(|g| has_condition(obj, s(g, &["conditionType"]))).count();
        format!("{ok}/{}", gates.len())
    };
    vec![
        name(obj),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts_text),
        age(obj, now),
        json!(or_none(ip)),
        json!(or_none(s(obj, &["spec", "nodeName"]))),
        json!(or_none(s(obj, &["status", "nominatedNodeName"]))),
        json!(gates_text),
    ]
}

fn service_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let ty = match s(obj, &["spec", "type"]) {
        "" => "ClusterIP",
        t => t,
    };
    let cluster_ip = arr(obj, &["spec", "clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| get(obj, &["spec", "clusterIP"]).and_then(Value::as_str))
        .filter(|v| !v.is_empty())
        .unwrap_or("<none>");
    let external_ips: Vec<&str> = arr(obj, &["spec", "externalIPs"]).iter().filter_map(Value::as_str).collect();
    let external = match ty {
        "ClusterIP" | "NodePort" => {
            if external_ips.is_empty() {
                "<none>".to_string()
            } else {
                external_ips.join(",")
            }
        }
        "LoadBalancer" => {
            let lb = lb_ingress(obj, &["status", "loadBalancer", "ingress"]);
            let mut all: Vec<&str> = lb.split(',').filter(|x| !x.is_empty()).collect();
            all.extend(external_ips.iter().copied());
            if all.is_empty() {
                "<pending>".to_string()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => s(obj, &["spec", "externalName"]).to_string(),
        _ => "<unknown>".to_string(),
    };
    let ports: Vec<String> = arr(obj, &["spec", "ports"])
        .iter()
        .map(|p| {
            let proto = match s(p, &["protocol"]) {
                "" => "TCP",
                x => x,
            };
            let port = i(p, &["port"]);
            match i(p, &["nodePort"]) {
                n if n > 0 => format!("{port}:{n}/{proto}"),
                _ => format!("{port}/{proto}"),
            }
        })
        .collect();
    let ports = if ports.is_empty() { "<none>".to_string() } else { ports.join(",") };
    vec![
        name(obj),
        json!(ty),
        json!(cluster_ip),
        json!(external),
        json!(ports),
        age(obj, now),
        json!(format_labels(get(obj, &["spec", "selector"]))),
    ]
}

fn event_cells(obj: &Value, now: DateTime<Utc>, v1: bool) -> Vec<Value> {
    // events.k8s.io/v1 stores the same event under different field names.
    let (involved, first_f, last_f, source_f, ctrl_f, inst_f, msg_f) = if v1 {
        (
            "regarding",
            "deprecatedFirstTimestamp",
            "deprecatedLastTimestamp",
            "deprecatedSource",
            "reportingController",
            "reportingInstance",
            "note",
        )
    } else {
        (
            "involvedObject",
            "firstTimestamp",
            "lastTimestamp",
            "source",
            "reportingComponent",
            "reportingInstance",
            "message",
        )
    };
    let event_time = time_at(obj, &["eventTime"]);
    let first = time_at(obj, &[first_f]).or(event_time);
    let mut last = time_at(obj, &[last_f]).or(first);
    let count_field = if v1 { "deprecatedCount" } else { "count" };
    let mut count = i(obj, &[count_field]);
    if let Some(series) = get(obj, &["series"]).filter(|v| v.is_object()) {
        last = time_at(series, &["lastObservedTime"]);
        count = i(series, &["count"]);
    }
    let kind = s(obj, &[involved, "kind"]).to_lowercase();
    let iname = s(obj, &[involved, "name"]);
    let target = if iname.is_empty() { kind } else { format!("{kind}/{iname}") };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_non_empty(s(obj, &[source_f, "component"]), s(obj, &[ctrl_f]));
    let instance = first_non_empty(s(obj, &[source_f, "host"]), s(obj, &[inst_f]));
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    vec![
        json!(since(last, now)),
        json!(s(obj, &["type"])),
        json!(s(obj, &["reason"])),
        json!(target),
        json!(s(obj, &[involved, "fieldPath"])),
        json!(source),
        json!(s(obj, &[msg_f]).trim()),
        json!(since(first, now)),
        json!(count),
        name(obj),
    ]
}

fn access_modes(obj: &Value) -> String {
    access_modes_at(obj, &["status", "accessModes"])
}

/// kube's short forms of the access modes at `path` (`RWO,ROX`).
fn access_modes_at(obj: &Value, path: &[&str]) -> String {
    let modes: Vec<&str> = arr(obj, path).iter().filter_map(Value::as_str).collect();
    [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
        .iter()
        .filter(|(long, _)| modes.contains(long))
        .map(|(_, short)| *short)
        .collect::<Vec<_>>()
        .join(",")
}

fn pvc_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let mut phase = match s(obj, &["status", "phase"]) {
        "" => "Pending",
        p => p,
    };
    if get(obj, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        phase = "Terminating";
    }
    let volume = s(obj, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        let cap = match get(obj, &["status", "capacity", "storage"]) {
            Some(Value::String(c)) => c.clone(),
            Some(Value::Number(n)) => n.to_string(),
            // Go prints a zero Quantity as "0".
            _ => "0".to_string(),
        };
        (cap, access_modes(obj))
    };
    let mut class = s(obj, &["spec", "storageClassName"]);
    if class.is_empty() {
        class = s(obj, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"]);
    }
    let vac = match s(obj, &["spec", "volumeAttributesClassName"]) {
        "" => "<unset>",
        v => v,
    };
    let mode = match s(obj, &["spec", "volumeMode"]) {
        "" => "Filesystem",
        m => m,
    };
    vec![
        name(obj),
        json!(phase),
        json!(volume),
        json!(capacity),
        json!(modes),
        json!(class),
        json!(vac),
        age(obj, now),
        json!(mode),
    ]
}

/// spec.replicas with the API default of 1.
fn replicas(obj: &Value) -> i64 {
    get(obj, &["spec", "replicas"]).and_then(Value::as_i64).unwrap_or(1)
}

fn job_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let succeeded = i(obj, &["status", "succeeded"]);
    let completions = match get(obj, &["spec", "completions"]).and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let par = get(obj, &["spec", "parallelism"]).and_then(Value::as_i64);
            // Both unset means the API defaulted completions and parallelism to 1.
            match par {
                Some(p) if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            }
        }
    };
    let start = time_at(obj, &["status", "startTime"]);
    let end = time_at(obj, &["status", "completionTime"]);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(now - s),
        (Some(s), Some(e)) => human_duration(e - s),
    };
    let status = if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if get(obj, &["metadata", "deletionTimestamp"]).is_some_and(|v| !v.is_null()) {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else if has_condition(obj, "SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let (c, im) = containers_images(get(obj, &["spec", "template", "spec"]));
    vec![
        name(obj),
        json!(status),
        json!(completions),
        json!(duration),
        age(obj, now),
        json!(c),
        json!(im),
        json!(format_label_selector(get(obj, &["spec", "selector"]))),
    ]
}

fn cronjob_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let tz = match s(obj, &["spec", "timeZone"]) {
        "" => "<none>",
        t => t,
    };
    let suspend = match get(obj, &["spec", "suspend"]) {
        Some(Value::Bool(b)) => b.to_string(),
        // The API defaults suspend to false.
        _ => "false".to_string(),
    };
    let last = match time_at(obj, &["status", "lastScheduleTime"]) {
        Some(t) => since(Some(t), now),
        None => "<none>".to_string(),
    };
    let job_spec = get(obj, &["spec", "jobTemplate", "spec"]);
    let (c, im) = containers_images(job_spec.and_then(|j| get(j, &["template", "spec"])));
    vec![
        name(obj),
        json!(s(obj, &["spec", "schedule"])),
        json!(tz),
        json!(suspend),
        json!(arr(obj, &["status", "active"]).len()),
        json!(last),
        age(obj, now),
        json!(c),
        json!(im),
        json!(format_label_selector(job_spec.and_then(|j| j.get("selector")))),
    ]
}

fn ingress_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let class = match s(obj, &["spec", "ingressClassName"]) {
        "" => "<none>",
        c => c,
    };
    let rules = arr(obj, &["spec", "rules"]);
    let max = 3;
    let mut hosts: Vec<&str> = Vec::new();
    let mut more = false;
    for r in rules {
        if hosts.len() == max {
            more = true;
        }
        let h = s(r, &["host"]);
        if !more && !h.is_empty() {
            hosts.push(h);
        }
    }
    let hosts = if hosts.is_empty() {
        "*".to_string()
    } else if more {
        format!("{} + {} more...", hosts.join(","), rules.len() - max)
    } else {
        hosts.join(",")
    };
    let ports = if arr(obj, &["spec", "tls"]).is_empty() { "80" } else { "80, 443" };
    vec![
        name(obj),
        json!(class),
        json!(hosts),
        json!(lb_ingress(obj, &["status", "loadBalancer", "ingress"])),
        json!(ports),
        age(obj, now),
    ]
}

fn hpa_metrics(obj: &Value) -> String {
    let specs = arr(obj, &["spec", "metrics"]);
    if specs.is_empty() {
        return "<none>".into();
    }
    let statuses = arr(obj, &["status", "currentMetrics"]);
    let qty = |v: Option<&Value>| int_or_string(v).unwrap_or_else(|| "<unknown>".into());
    let mut list: Vec<String> = Vec::new();
    for (idx, m) in specs.iter().enumerate() {
        let st = statuses.get(idx);
        let text = match s(m, &["type"]) {
            "Resource" | "ContainerResource" => {
                let key = if s(m, &["type"]) == "Resource" { "resource" } else { "containerResource" };
                let rname = s(m, &[key, "name"]);
                let target = get(m, &[key, "target"]);
                if let Some(avg) = target.and_then(|t| t.get("averageValue")) {
                    let cur = qty(st.and_then(|s| get(s, &[key, "current", "averageValue"])));
                    format!("{rname}: {cur}/{}", qty(Some(avg)))
                } else {
                    let cur = st
                        .and_then(|s| get(s, &[key, "current", "averageUtilization"]))
                        .and_then(Value::as_i64)
                        .map_or("<unknown>".to_string(), |u| format!("{u}%"));
                    let tgt = target
                        .and_then(|t| t.get("averageUtilization"))
                        .and_then(Value::as_i64)
                        .map_or("<auto>".to_string(), |u| format!("{u}%"));
                    format!("{rname}: {cur}/{tgt}")
                }
            }
            "Pods" => format!(
                "{}/{}",
                qty(st.and_then(|s| get(s, &["pods", "current", "averageValue"]))),
                qty(get(m, &["pods", "target", "averageValue"]))
            ),
            ty @ ("Object" | "External") => {
                let key = if ty == "Object" { "object" } else { "external" };
                let target = get(m, &[key, "target"]);
                if let Some(avg) = target.and_then(|t| t.get("averageValue")) {
                    let cur = qty(st.and_then(|s| get(s, &[key, "current", "averageValue"])));
                    format!("{cur}/{} (avg)", qty(Some(avg)))
                } else {
                    let cur = qty(st.and_then(|s| get(s, &[key, "current", "value"])));
                    format!("{cur}/{}", qty(target.and_then(|t| t.get("value"))))
                }
            }
            _ => "<unknown type>".to_string(),
        };
        list.push(text);
    }
    let max = 2;
    if list.len() > max {
        let extra = list.len() - max;
        list.truncate(max);
        return format!("{} + {extra} more...", list.join(", "));
    }
    list.join(", ")
}

fn binding_cells(obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let role = format!("{}/{}", s(obj, &["roleRef", "kind"]), s(obj, &["roleRef", "name"]));
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for sub in arr(obj, &["subjects"]) {
        let n = s(sub, &["name"]);
        match s(sub, &["kind"]) {
            "User" => users.push(n.to_string()),
            "Group" => groups.push(n.to_string()),
            "ServiceAccount" => sas.push(format!("{}/{n}", s(sub, &["namespace"]))),
            _ => {}
        }
    }
    vec![
        name(obj),
        json!(role),
        age(obj, now),
        json!(users.join(", ")),
        json!(groups.join(", ")),
        json!(sas.join(", ")),
    ]
}

/// printResourceQuota: `name: used/hard` for each resource in `status.hard`, sorted, with `limits.*`
/// in the second column; both empty until a quota controller fills the status.
fn quota_usage(obj: &Value) -> (String, String) {
    let Some(hard) = get(obj, &["status", "hard"]).and_then(Value::as_object) else {
        return (String::new(), String::new());
    };
    let text = |v: Option<&Value>| match v {
        Some(Value::String(q)) => q.clone(),
        Some(v) if !v.is_null() => v.to_string(),
        _ => "0".into(),
    };
    let (mut request, mut limit) = (Vec::new(), Vec::new());
    // serde_json's map is ordered by key, as kube sorts the resource names.
    for (resource, h) in hard {
        let used = text(get(obj, &["status", "used", resource.as_str()]));
        let entry = format!("{resource}: {used}/{}", text(Some(h)));
        match resource.split_once('.') {
            Some(("limits", _)) => limit.push(entry),
            _ => request.push(entry),
        }
    }
    (request.join(", "), limit.join(", "))
}

/// kube's `+ N more...` for lists cut at three.
fn at_most_three(list: Vec<String>, empty: &str) -> String {
    let count = list.len();
    if count > 3 {
        return format!("{} + {} more...", list[..3].join(","), count - 3);
    }
    if list.is_empty() {
        empty.into()
    } else {
        list.join(",")
    }
}

/// formatEndpoints: `ip:port` for every address and port of every subset (bare IPs for a subset
/// without ports), `<none>` without subsets.
fn format_endpoints(obj: &Value) -> String {
    let subsets = arr(obj, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".into();
    }
    let mut list = Vec::new();
    for ss in subsets {
        let ips: Vec<&str> = arr(ss, &["addresses"]).iter().map(|a| s(a, &["ip"])).collect();
        let ports = arr(ss, &["ports"]);
        if ports.is_empty() {
            list.extend(ips.iter().map(|ip| ip.to_string()));
        }
        for port in ports.iter().map(|p| i(p, &["port"])) {
            // net.JoinHostPort brackets IPv6 addresses.
            list.extend(ips.iter().map(|ip| {
                if ip.contains(':') {
                    format!("[{ip}]:{port}")
                } else {
                    format!("{ip}:{port}")
                }
            }));
        }
    }
    at_most_three(list, "")
}

/// formatDiscoveryPorts: each port's number, else its name, else `*`.
fn slice_ports(obj: &Value) -> String {
    let ports = arr(obj, &["ports"]).iter().map(|p| match (p.get("port").and_then(Value::as_i64), p.get("name")) {
        (Some(n), _) => n.to_string(),
        (None, Some(Value::String(name))) => name.clone(),
        _ => "*".into(),
    });
    at_most_three(ports.collect(), "<unset>")
}

/// formatDiscoveryEndpoints: every address of every endpoint.
fn slice_addresses(obj: &Value) -> String {
    let addresses = arr(obj, &["endpoints"])
        .iter()
        .flat_map(|e| arr(e, &["addresses"]).iter().filter_map(Value::as_str).map(str::to_string));
    at_most_three(addresses.collect(), "<unset>")
}

/// An owner reference as `kind.group/name`, lowercased as kubectl prints a resource name with its kind.
fn controller_name(owner: &Value) -> String {
    let group = s(owner, &["apiVersion"]).rsplit_once('/').map_or("", |(g, _)| g);
    let kind = s(owner, &["kind"]);
    let group_kind = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
    format!("{}/{}", group_kind.to_lowercase(), s(owner, &["name"]))
}

fn created_at(obj: &Value) -> Value {
    match time_at(obj, &["metadata", "creationTimestamp"]) {
        Some(t) => json!(t.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        // Go formats a zero time; the sentinel keeps the column aligned.
        None => json!("0001-01-01T00:00:00Z"),
    }
}

fn cells(group: &str, plural: &str, obj: &Value, now: DateTime<Utc>) -> Vec<Value> {
    if let Some(kind) = infra::Infra::of(group, plural) {
        return kind.cells(obj, now);
    }
    let or = |v: &str, d: &str| {
        if v.is_empty() {
            d.to_string()
        } else {
            v.to_string()
        }
    };
    match kind_of(group, plural) {
        // The API server sets phase Active on create; print that for stored objects lacking status.
        Kind::Namespace => vec![name(obj), json!(or(s(obj, &["status", "phase"]), "Active")), age(obj, now)],
        Kind::ConfigMap => {
            vec![name(obj), json!(obj_len(obj, &["data"]) + obj_len(obj, &["binaryData"])), age(obj, now)]
        }
        Kind::Secret => vec![
            name(obj),
            json!(or(s(obj, &["type"]), "Opaque")),
            json!(obj_len(obj, &["data"]) + obj_len(obj, &["stringData"])),
            age(obj, now),
        ],
        Kind::ServiceAccount => vec![name(obj), json!(arr(obj, &["secrets"]).len()), age(obj, now)],
        Kind::Service => service_cells(obj, now),
        Kind::Event => event_cells(obj, now, false),
        Kind::EventV1 => event_cells(obj, now, true),
        Kind::Pod => pod_cells(obj, now),
        Kind::Pvc => pvc_cells(obj, now),
        Kind::Deployment => {
            let (c, im) = containers_images(get(obj, &["spec", "template", "spec"]));
            vec![
                name(obj),
                json!(format!("{}/{}", i(obj, &["status", "readyReplicas"]), replicas(obj))),
                json!(i(obj, &["status", "updatedReplicas"])),
                json!(i(obj, &["status", "availableReplicas"])),
                age(obj, now),
                json!(c),
                json!(im),
                json!(format_label_selector(get(obj, &["spec", "selector"]))),
            ]
        }
        Kind::ReplicaSet => {
            let (c, im) = containers_images(get(obj, &["spec", "template", "spec"]));
            vec![
                name(obj),
                json!(replicas(obj)),
                json!(i(obj, &["status", "replicas"])),
                json!(i(obj, &["status", "readyReplicas"])),
                age(obj, now),
                json!(c),
                json!(im),
                json!(format_label_selector(get(obj, &["spec", "selector"]))),
            ]
        }
        Kind::StatefulSet => {
            let (c, im) = containers_images(get(obj, &["spec", "template", "spec"]));
            vec![
                name(obj),
                json!(format!("{}/{}", i(obj, &["status", "readyReplicas"]), replicas(obj))),
                age(obj, now),
                json!(c),
                json!(im),
            ]
        }
        Kind::DaemonSet => {
            let (c, im) = containers_images(get(obj, &["spec", "template", "spec"]));
            vec![
                name(obj),
                json!(i(obj, &["status", "desiredNumberScheduled"])),
                json!(i(obj, &["status", "currentNumberScheduled"])),
                json!(i(obj, &["status", "numberReady"])),
                json!(i(obj, &["status", "updatedNumberScheduled"])),
                json!(i(obj, &["status", "numberAvailable"])),
                json!(format_labels(get(obj, &["spec", "template", "spec", "nodeSelector"]))),
                age(obj, now),
                json!(c),
                json!(im),
                json!(format_label_selector(get(obj, &["spec", "selector"]))),
            ]
        }
        Kind::Job => job_cells(obj, now),
        Kind::CronJob => cronjob_cells(obj, now),
        Kind::Ingress => ingress_cells(obj, now),
        Kind::NetworkPolicy => vec![
            name(obj),
            json!(format_label_selector(Some(get(obj, &["spec", "podSelector"]).unwrap_or(&json!({}))))),
            age(obj, now),
        ],
        Kind::Hpa => vec![
            name(obj),
            json!(format!(
                "{}/{}",
                s(obj, &["spec", "scaleTargetRef", "kind"]),
                s(obj, &["spec", "scaleTargetRef", "name"])
            )),
            json!(hpa_metrics(obj)),
            json!(get(obj, &["spec", "minReplicas"])
                .and_then(Value::as_i64)
                .map_or("<unset>".to_string(), |v| v.to_string())),
            json!(i(obj, &["spec", "maxReplicas"])),
            json!(i(obj, &["status", "currentReplicas"])),
            age(obj, now),
        ],
        Kind::Pdb => vec![
            name(obj),
            json!(int_or_string(get(obj, &["spec", "minAvailable"])).unwrap_or("N/A".into())),
            json!(int_or_string(get(obj, &["spec", "maxUnavailable"])).unwrap_or("N/A".into())),
            json!(i(obj, &["status", "disruptionsAllowed"])),
            age(obj, now),
        ],
        Kind::Lease => vec![name(obj), json!(s(obj, &["spec", "holderIdentity"])), age(obj, now)],
        Kind::Role | Kind::Crd | Kind::LimitRange => vec![name(obj), created_at(obj)],
        Kind::ResourceQuota => {
            let (request, limit) = quota_usage(obj);
            vec![name(obj), age(obj, now), json!(request), json!(limit)]
        }
        Kind::Endpoints => vec![name(obj), json!(format_endpoints(obj)), age(obj, now)],
        Kind::EndpointSlice => vec![
            name(obj),
            json!(s(obj, &["addressType"])),
            json!(slice_ports(obj)),
            json!(slice_addresses(obj)),
            age(obj, now),
        ],
        Kind::ControllerRevision => {
            let controller = arr(obj, &["metadata", "ownerReferences"])
                .iter()
                .find(|r| r.get("controller") == Some(&Value::Bool(true)))
                .map_or_else(|| "<none>".to_string(), controller_name);
            vec![name(obj), json!(controller), json!(i(obj, &["revision"])), age(obj, now)]
        }
        Kind::IngressClass => {
            let parameters = match get(obj, &["spec", "parameters"]).filter(|p| p.is_object()) {
                Some(p) => {
                    let group = p.get("apiGroup").and_then(Value::as_str).map(|g| format!(".{g}")).unwrap_or_default();
                    format!("{}{group}/{}", s(p, &["kind"]), s(p, &["name"]))
                }
                None => "<none>".into(),
            };
            vec![name(obj), json!(s(obj, &["spec", "controller"])), json!(parameters), age(obj, now)]
        }
        Kind::PriorityClass => vec![
            name(obj),
            json!(i(obj, &["value"])),
            json!(get(obj, &["globalDefault"]).and_then(Value::as_bool).unwrap_or(false)),
            age(obj, now),
            json!(s(obj, &["preemptionPolicy"])),
        ],
        Kind::StorageClass => {
            let annotations = get(obj, &["metadata", "annotations"]);
            let default =
                ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
                    .iter()
                    .any(|a| annotations.and_then(|m| m.get(*a)).and_then(Value::as_str) == Some("true"));
            let mut n = s(obj, &["metadata", "name"]).to_string();
            if default {
                n.push_str(" (default)");
            }
            vec![
                json!(n),
                json!(s(obj, &["provisioner"])),
                json!(or(s(obj, &["reclaimPolicy"]), "Delete")),
                json!(or(s(obj, &["volumeBindingMode"]), "Immediate")),
                json!(get(obj, &["allowVolumeExpansion"]).and_then(Value::as_bool).unwrap_or(false)),
                age(obj, now),
            ]
        }
        Kind::RoleBinding | Kind::ClusterRoleBinding => binding_cells(obj, now),
        Kind::LogicalCluster => vec![
            name(obj),
            match get(obj, &["status", "phase"]).and_then(Value::as_str) {
                Some(p) => json!(p),
                None => Value::Null,
            },
            get(obj, &["status", "usage", "objects"]).cloned().unwrap_or(Value::Null),
            match get(obj, &["status", "usage", "storageBytes"]).and_then(Value::as_u64) {
                Some(b) => json!(binary_size(b)),
                None => Value::Null,
            },
            get(obj, &["status", "usage", "namespaces"]).cloned().unwrap_or(Value::Null),
            age(obj, now),
            json!(crate::shard::of(obj).unwrap_or(crate::shard::DEFAULT)),
        ],
        Kind::Default => vec![name(obj), age(obj, now)],
    }
}

fn row_object(obj: &Value, include: IncludeObject) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
        })),
        IncludeObject::Object => Some(obj.clone()),
    }
}

fn make_row(cells: Vec<Value>, obj: &Value, include: IncludeObject) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
    if let Some(o) = row_object(obj, include) {
        row.insert("object".into(), o);
    }
    Value::Object(row)
}

/// One row for an object: `{"cells":[...], "object": PartialObjectMetadata | full object | absent}`.
pub fn row(group: &str, plural: &str, obj: &Value, include: IncludeObject, now: DateTime<Utc>) -> Value {
    make_row(cells(group, plural, obj, now), obj, include)
}

/// Keeps only the list-metadata fields a Table carries, dropping empty ones.
fn table_meta(list_meta: Value) -> Value {
    let mut out = Map::new();
    if let Value::Object(m) = list_meta {
        for (k, v) in m {
            let keep = match &v {
                Value::Null => false,
                Value::String(s) => !s.is_empty(),
                _ => true,
            };
            if keep && matches!(k.as_str(), "resourceVersion" | "continue" | "remainingItemCount" | "selfLink") {
                out.insert(k, v);
            }
        }
    }
    Value::Object(out)
}

fn wrap_table(columns: Vec<Value>, rows: Vec<Value>, list_meta: Value) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": table_meta(list_meta),
        "columnDefinitions": columns,
        "rows": rows,
    })
}

/// A whole Table for a list or a single object. `list_meta` is the list's metadata
/// (`resourceVersion`, `continue`, `remainingItemCount`). Without `with_columns` (later watch
/// events) `columnDefinitions` is empty.
pub fn table(
    group: &str,
    plural: &str,
    objs: &[Value],
    list_meta: Value,
    include: IncludeObject,
    with_columns: bool,
    now: DateTime<Utc>,
) -> Value {
    let columns = if with_columns { column_definitions(group, plural) } else { Vec::new() };
    let rows = objs.iter().map(|o| row(group, plural, o, include, now)).collect();
    wrap_table(columns, rows, list_meta)
}

/// A human duration the way kube prints ages (apimachinery `duration.HumanDuration`):
/// exact seconds below 2 minutes, minutes+seconds below 10 minutes, then coarser units
/// ("3m10s", "70m", "5h30m", "47h", "2d1h", "367d", "2y1d", "8y"). Clock skew of up to
/// a second reads "0s"; larger negative durations are "<invalid>".
pub fn human_duration(d: chrono::Duration) -> String {
    let secs = d.num_seconds();
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 { format!("{minutes}m") } else { format!("{minutes}m{s}s") };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 { format!("{hours}h") } else { format!("{hours}h{m}m") };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 { format!("{}d", hours / 24) } else { format!("{}d{h}h", hours / 24) };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 { format!("{}y", hours / 24 / 365) } else { format!("{}y{dy}d", hours / 24 / 365) };
    }
    format!("{}y", hours / 24 / 365)
}

// ---- CRD additionalPrinterColumns ---------------------------------------------------------

#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
}

/// Parses the simple JSONPath subset CRDs use: `.a.b`, `.a[0].b`, `.a[*].b`, `.a['x.y']`,
/// optionally wrapped in `{}`.
fn parse_path(p: &str) -> Option<Vec<Step>> {
    let p = p.trim();
    let p = p.strip_prefix('{').and_then(|x| x.strip_suffix('}')).unwrap_or(p);
    let mut steps = Vec::new();
    let b = p.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'.' => {
                let start = i + 1;
                let mut j = start;
                while j < b.len() && b[j] != b'.' && b[j] != b'[' {
                    j += 1;
                }
                if j > start {
                    steps.push(Step::Field(p[start..j].to_string()));
                }
                i = j;
            }
            b'[' => {
                let end = start_of_close(p, i)?;
                let inner = p[i + 1..end].trim();
                if inner == "*" {
                    steps.push(Step::All);
                } else if let Some(q) = inner
                    .strip_prefix('\'')
                    .and_then(|x| x.strip_suffix('\''))
                    .or_else(|| inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
                {
                    steps.push(Step::Field(q.to_string()));
                } else {
                    steps.push(Step::Index(inner.parse().ok()?));
                }
                i = end + 1;
            }
            _ => {
                // A leading bare name (`a.b`) is accepted as if it started with a dot.
                let start = i;
                let mut j = i;
                while j < b.len() && b[j] != b'.' && b[j] != b'[' {
                    j += 1;
                }
                steps.push(Step::Field(p[start..j].to_string()));
                i = j;
            }
        }
    }
    Some(steps)
}

fn start_of_close(p: &str, open: usize) -> Option<usize> {
    p[open..].find(']').map(|k| open + k)
}

fn eval_path<'a>(obj: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = vec![obj];
    for st in steps {
        let mut next = Vec::new();
        for v in cur {
            match st {
                Step::Field(f) => {
                    if let Some(x) = v.get(f.as_str()) {
                        next.push(x);
                    }
                }
                Step::Index(n) => {
                    if let Some(x) = v.get(*n) {
                        next.push(x);
                    }
                }
                Step::All => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
            }
        }
        cur = next;
    }
    cur
}

/// Columns for a custom resource from its CRD version's `additionalPrinterColumns`:
/// Name first; without any, the default Age (`date`) column.
pub fn custom_columns(cols: &[Value]) -> Vec<Value> {
    let mut out = vec![name_col()];
    if cols.is_empty() {
        out.push(col("Age", "date", CREATED_DESC, 0));
        return out;
    }
    for c in cols {
        out.push(json!({
            "name": s(c, &["name"]),
            "type": s(c, &["type"]),
            "format": s(c, &["format"]),
            "description": s(c, &["description"]),
            "priority": i(c, &["priority"]),
        }));
    }
    out
}

/// A cell value typed per the column, as the CRD table convertor does; mismatches are null.
/// A cell of a printer column of type `ty` showing `v`; text is cut at `cap` bytes.
fn typed_cell(ty: &str, v: &Value, now: DateTime<Utc>, cap: usize) -> Value {
    match (ty, v) {
        (_, Value::Null) => Value::Null,
        ("integer", Value::Number(n)) => {
            n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).map_or(Value::Null, |x| json!(x))
        }
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |x| json!(x)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("date", Value::String(t)) => match parse_time(t) {
            Some(t) => json!(human_duration(now - t)),
            None => json!("<invalid>"),
        },
        // String columns print whatever the path finds, like kubectl's jsonpath printer.
        ("string", Value::String(x)) => json!(within(x, cap)),
        ("string", other) => json!(json_within(other, cap)),
        _ => Value::Null,
    }
}

/// Most bytes of text the cells of one custom resource's row hold: a CRD's printer columns are many
/// as its author likes, each may print a whole object as text, and each row is built before it is
/// sent, so ten thousand columns printing a 1 MiB spec would build 10 GiB for one row. A row of real
/// columns takes some hundreds of bytes.
const ROW_TEXT_BYTES: usize = 256 * 1024;

/// `text` cut to at most `cap` bytes (at a character's edge), ending in `...` when cut.
fn within(text: &str, cap: usize) -> String {
    if text.len() <= cap {
        return text.to_string();
    }
    let mut end = cap.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// `v` as JSON text, written no further than `cap` bytes (and cut as [`within`] cuts).
fn json_within(v: &Value, cap: usize) -> String {
    /// A writer that takes bytes up to its cap and then fails, which ends the serialization.
    struct Capped(Vec<u8>, usize);
    impl std::io::Write for Capped {
        fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
            let room = self.1.saturating_sub(self.0.len());
            if data.len() > room {
                self.0.extend_from_slice(&data[..room]);
                return Err(std::io::Error::other("past the cap"));
            }
            self.0.extend_from_slice(data);
            Ok(data.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // One byte more than the cap tells a cut text from one that fits exactly.
    let mut out = Capped(Vec::new(), cap.saturating_add(1));
    let _ = serde_json::to_writer(&mut out, v);
    let text = match String::from_utf8(out.0) {
        Ok(t) => t,
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            String::from_utf8(bytes).unwrap_or_default()
        }
    };
    within(&text, cap)
}

/// One row for a custom resource: Name, then one cell per additional printer column
/// (`null` when the path finds nothing). Only the first match of a `[*]` path is used,
/// as kube-apiserver does.
pub fn custom_row(cols: &[Value], obj: &Value, include: IncludeObject, now: DateTime<Utc>) -> Value {
    let default_cols;
    let cols = if cols.is_empty() {
        default_cols = [json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})];
        &default_cols[..]
    } else {
        cols
    };
    let mut cells = vec![name(obj)];
    let mut left = ROW_TEXT_BYTES;
    for c in cols {
        let ty = s(c, &["type"]);
        let found = parse_path(s(c, &["jsonPath"])).map(|steps| eval_path(obj, &steps)).unwrap_or_default();
        let cell = match found.first() {
            Some(v) => typed_cell(ty, v, now, left),
            None => Value::Null,
        };
        left = left.saturating_sub(cell.as_str().map_or(8, str::len));
        cells.push(cell);
    }
    make_row(cells, obj, include)
}

/// A whole Table for custom resources with the given `additionalPrinterColumns`.
pub fn custom_table(
    cols: &[Value],
    objs: &[Value],
    list_meta: Value,
    include: IncludeObject,
    with_columns: bool,
    now: DateTime<Utc>,
) -> Value {
    let columns = if with_columns { custom_columns(cols) } else { Vec::new() };
    let rows = objs.iter().map(|o| custom_row(cols, o, include, now)).collect();
    wrap_table(columns, rows, list_meta)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2025, 1, 10, 12, 0, 0).unwrap()
    }

    fn meta(name: &str) -> Value {
        json!({"name": name, "namespace": "default", "creationTimestamp": "2025-01-10T11:55:00Z", "uid": "u"})
    }

    fn col_names(group: &str, plural: &str) -> Vec<String> {
        column_definitions(group, plural).iter().map(|c| c["name"].as_str().unwrap().to_string()).collect()
    }

    fn cells_of(group: &str, plural: &str, obj: Value) -> Vec<Value> {
        let r = row(group, plural, &obj, IncludeObject::None, now());
        assert!(r.get("object").is_none());
        let c = r["cells"].as_array().unwrap().clone();
        assert_eq!(c.len(), column_definitions(group, plural).len(), "{plural}");
        c
    }

    #[test]
    fn human_duration_matches_go() {
        let cases: &[(i64, &str)] = &[
            (-2, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (1, "1s"),
            (70, "70s"),
            (119, "119s"),
            (120, "2m"),
            (190, "3m10s"),
            (599, "9m59s"),
            (600, "10m"),
            (70 * 60, "70m"),
            (3 * 3600, "3h"),
            (5 * 3600 + 30 * 60, "5h30m"),
            (8 * 3600, "8h"),
            (47 * 3600, "47h"),
            (49 * 3600, "2d1h"),
            (3 * 86400, "3d"),
            ((8 * 24 + 2) * 3600, "8d"),
            (367 * 86400, "367d"),
            (689 * 86400, "689d"),
            ((365 * 2 * 24 + 25) * 3600, "2y1d"),
            (3 * 365 * 86400, "3y"),
            ((365 * 8 * 24 + 2) * 3600, "8y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(Duration::seconds(*secs)), *want, "{secs}s");
        }
        // sub-second precision truncates toward zero like Go's int(d.Seconds())
        assert_eq!(human_duration(Duration::milliseconds(1999)), "1s");
        assert_eq!(human_duration(Duration::milliseconds(-1500)), "0s");
    }

    #[test]
    fn namespace_configmap_secret_sa() {
        assert_eq!(col_names("", "namespaces"), ["Name", "Status", "Age"]);
        let c = cells_of("", "namespaces", json!({"metadata": meta("ns1")}));
        assert_eq!(c, vec![json!("ns1"), json!("Active"), json!("5m")]);

        assert_eq!(col_names("", "configmaps"), ["Name", "Data", "Age"]);
        let c = cells_of(
            "",
            "configmaps",
            json!({"metadata": meta("c"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": ""}}),
        );
        assert_eq!(c, vec![json!("c"), json!(3), json!("5m")]);

        assert_eq!(col_names("", "secrets"), ["Name", "Type", "Data", "Age"]);
        let c = cells_of("", "secrets", json!({"metadata": meta("s"), "data": {"x": "eA=="}}));
        assert_eq!(c, vec![json!("s"), json!("Opaque"), json!(1), json!("5m")]);

        assert_eq!(col_names("", "serviceaccounts"), ["Name", "Secrets", "Age"]);
        let c = cells_of("", "serviceaccounts", json!({"metadata": meta("default")}));
        assert_eq!(c, vec![json!("default"), json!(0), json!("5m")]);
    }

    #[test]
    fn quota_limit_range_and_endpoints() {
        assert_eq!(col_names("", "resourcequotas"), ["Name", "Age", "Request", "Limit"]);
        // Until a quota controller fills the status there is nothing to print.
        let fresh = json!({"metadata": meta("q"), "spec": {"hard": {"pods": "10"}}, "status": {}});
        assert_eq!(cells_of("", "resourcequotas", fresh), vec![json!("q"), json!("5m"), json!(""), json!("")]);
        let counted = json!({"metadata": meta("q"), "status": {
            "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi", "limits.memory": "2Gi"},
            "used": {"pods": "3", "limits.cpu": "500m"}}});
        assert_eq!(
            cells_of("", "resourcequotas", counted),
            vec![
                json!("q"),
                json!("5m"),
                json!("pods: 3/10, requests.memory: 0/1Gi"),
                json!("limits.cpu: 500m/2, limits.memory: 0/2Gi")
            ]
        );

        assert_eq!(col_names("", "limitranges"), ["Name", "Created At"]);
        assert_eq!(cells_of("", "limitranges", json!({"metadata": meta("l")}))[1], json!("2025-01-10T11:55:00Z"));

        assert_eq!(col_names("", "endpoints"), ["Name", "Endpoints", "Age"]);
        let ep =
            |subsets: Value| cells_of("", "endpoints", json!({"metadata": meta("e"), "subsets": subsets}))[1].clone();
        assert_eq!(ep(json!([])), json!("<none>"));
        let ips = json!([{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}]);
        assert_eq!(
            ep(json!([{"addresses": ips, "ports": [{"port": 80}, {"port": 443}]}])),
            json!("10.0.0.1:80,10.0.0.2:80,[fd00::3]:80 + 3 more...")
        );
        assert_eq!(ep(json!([{"addresses": [{"ip": "10.0.0.9"}]}])), json!("10.0.0.9"));
    }

    #[test]
    fn slices_revisions_and_classes() {
        assert_eq!(
            col_names("discovery.k8s.io", "endpointslices"),
            ["Name", "AddressType", "Ports", "Endpoints", "Age"]
        );
        let slice = json!({"metadata": meta("s"), "addressType": "IPv4",
            "ports": [{"port": 80}, {"name": "metrics"}, {}, {"port": 9}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2"]}]});
        assert_eq!(
            cells_of("discovery.k8s.io", "endpointslices", slice),
            vec![json!("s"), json!("IPv4"), json!("80,metrics,* + 1 more..."), json!("10.0.0.1,10.0.0.2"), json!("5m")]
        );
        let empty = json!({"metadata": meta("s"), "addressType": "IPv6"});
        assert_eq!(cells_of("discovery.k8s.io", "endpointslices", empty)[2..4], [json!("<unset>"), json!("<unset>")]);

        assert_eq!(col_names("apps", "controllerrevisions"), ["Name", "Controller", "Revision", "Age"]);
        let mut rev = json!({"metadata": meta("web-7d4b9c"), "revision": 3});
        assert_eq!(cells_of("apps", "controllerrevisions", rev.clone())[1..3], [json!("<none>"), json!(3)]);
        rev["metadata"]["ownerReferences"] = json!([
            {"apiVersion": "v1", "kind": "Pod", "name": "other"},
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "Web", "controller": true}
        ]);
        assert_eq!(cells_of("apps", "controllerrevisions", rev)[1], json!("statefulset.apps/Web"));

        assert_eq!(col_names("networking.k8s.io", "ingressclasses"), ["Name", "Controller", "Parameters", "Age"]);
        let mut class = json!({"metadata": meta("nginx"), "spec": {"controller": "k8s.io/ingress-nginx"}});
        assert_eq!(
            cells_of("networking.k8s.io", "ingressclasses", class.clone())[1..3],
            [json!("k8s.io/ingress-nginx"), json!("<none>")]
        );
        class["spec"]["parameters"] = json!({"apiGroup": "k8s.example.com", "kind": "Params", "name": "p"});
        assert_eq!(cells_of("networking.k8s.io", "ingressclasses", class)[2], json!("Params.k8s.example.com/p"));

        assert_eq!(
            col_names("scheduling.k8s.io", "priorityclasses"),
            ["Name", "Value", "Global-Default", "Age", "PreemptionPolicy"]
        );
        let pc = json!({"metadata": meta("high"), "value": 1000, "preemptionPolicy": "Never"});
        assert_eq!(
            cells_of("scheduling.k8s.io", "priorityclasses", pc),
            vec![json!("high"), json!(1000), json!(false), json!("5m"), json!("Never")]
        );

        assert_eq!(
            col_names("storage.k8s.io", "storageclasses"),
            ["Name", "Provisioner", "ReclaimPolicy", "VolumeBindingMode", "AllowVolumeExpansion", "Age"]
        );
        let mut sc = json!({"metadata": meta("fast"), "provisioner": "csi.example.com"});
        assert_eq!(
            cells_of("storage.k8s.io", "storageclasses", sc.clone()),
            vec![
                json!("fast"),
                json!("csi.example.com"),
                json!("Delete"),
                json!("Immediate"),
                json!(false),
                json!("5m")
            ]
        );
        sc["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
        sc["allowVolumeExpansion"] = json!(true);
        let c = cells_of("storage.k8s.io", "storageclasses", sc);
        assert_eq!((&c[0], &c[4]), (&json!("fast (default)"), &json!(true)));
    }

    #[test]
    fn column_shapes() {
        let cols = column_definitions("", "configmaps");
        assert_eq!(cols[0]["format"], "name");
        assert_eq!(cols[0]["priority"], 0);
        assert_eq!(cols[2]["type"], "string");
        for c in &cols {
            for k in ["name", "type", "format", "description", "priority"] {
                assert!(c.get(k).is_some(), "{k}");
            }
        }
        let svc = column_definitions("", "services");
        assert_eq!(svc.last().unwrap()["priority"], 1);
        assert_eq!(col_names("example.com", "widgets"), ["Name", "Age"]);
        assert_eq!(column_definitions("example.com", "widgets")[1]["type"], "date");
    }

    #[test]
    fn service_cells_variants() {
        assert_eq!(
            col_names("", "services"),
            ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]
        );
        let c = cells_of(
            "",
            "services",
            json!({"metadata": meta("web"), "spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}],
                   "selector": {"b": "2", "a": "1"}, "clusterIP": "10.0.0.5"}}),
        );
        assert_eq!(
            c,
            vec![
                json!("web"),
                json!("ClusterIP"),
                json!("10.0.0.5"),
                json!("<none>"),
                json!("80/TCP,53/UDP"),
                json!("5m"),
                json!("a=1,b=2")
            ]
        );
        let c = cells_of(
            "",
            "services",
            json!({"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "ports": [{"port": 443, "nodePort": 30443, "protocol": "TCP"}]}}),
        );
        assert_eq!(c[2], json!("<none>"));
        assert_eq!(c[3], json!("<pending>"));
        assert_eq!(c[4], json!("443:30443/TCP"));
        assert_eq!(c[6], json!("<none>"));
        let c = cells_of(
            "",
            "services",
            json!({"metadata": meta("ext"), "spec": {"type": "ExternalName", "externalName": "example.com"}}),
        );
        assert_eq!(c[3], json!("example.com"));
        assert_eq!(c[4], json!("<none>"));
    }

    #[test]
    fn pod_without_status_is_pending() {
        assert_eq!(
            col_names("", "pods"),
            ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
        );
        let c = cells_of(
            "",
            "pods",
            json!({"metadata": meta("p"), "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}),
        );
        assert_eq!(
            c,
            vec![
                json!("p"),
                json!("0/2"),
                json!("Pending"),
                json!("0"),
                json!("5m"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn pod_with_statuses() {
        let pod = json!({"metadata": meta("p"),
        "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
        "status": {"phase": "Running", "podIP": "10.1.1.1", "conditions": [{"type": "Ready", "status": "False"}],
          "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"finishedAt": "2025-01-10T11:58:00Z"}}},
            {"name": "b", "ready": false, "restartCount": 1, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
        ]}});
        let c = cells_of("", "pods", pod);
        assert_eq!(c[1], json!("1/2"));
        assert_eq!(c[2], json!("CrashLoopBackOff"));
        assert_eq!(c[3], json!("3 (2m ago)"));
        assert_eq!(c[5], json!("10.1.1.1"));
        assert_eq!(c[6], json!("n1"));

        let init = json!({"metadata": meta("p"),
            "spec": {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
            "status": {"phase": "Pending", "initContainerStatuses": [
                {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
                {"name": "i2", "state": {"running": {}}}]}});
        assert_eq!(cells_of("", "pods", init)[2], json!("Init:1/2"));

        let mut deleting = json!({"metadata": meta("p"), "spec": {"containers": []}, "status": {"phase": "Running"}});
        deleting["metadata"]["deletionTimestamp"] = json!("2025-01-10T11:59:00Z");
        assert_eq!(cells_of("", "pods", deleting)[2], json!("Terminating"));
    }

    #[test]
    fn workloads_without_status() {
        assert_eq!(
            col_names("apps", "deployments"),
            ["Name", "Ready", "Up-to-date", "Available", "Age", "Containers", "Images", "Selector"]
        );
        let tmpl = json!({"spec": {"containers": [{"name": "web", "image": "nginx:1"}, {"name": "side", "image": "busybox"}]}});
        let d = json!({"metadata": meta("d"), "spec": {"replicas": 3, "template": tmpl,
            "selector": {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}}});
        let c = cells_of("apps", "deployments", d);
        assert_eq!(
            c,
            vec![
                json!("d"),
                json!("0/3"),
                json!(0),
                json!(0),
                json!("5m"),
                json!("web,side"),
                json!("nginx:1,busybox"),
                json!("app=web,tier in (a,b)")
            ]
        );
        let rs = cells_of("apps", "replicasets", json!({"metadata": meta("r"), "spec": {"template": tmpl}}));
        assert_eq!(&rs[1..4], &[json!(1), json!(0), json!(0)]);
        let sts = cells_of("apps", "statefulsets", json!({"metadata": meta("s"), "spec": {"replicas": 2}}));
        assert_eq!(sts[1], json!("0/2"));
        assert_eq!(col_names("apps", "daemonsets").len(), 11);
        let ds = cells_of("apps", "daemonsets", json!({"metadata": meta("ds"), "spec": {"template": tmpl}}));
        assert_eq!(ds[6], json!("<none>"));
        assert_eq!(ds[10], json!("<none>"));
    }

    #[test]
    fn jobs_and_cronjobs() {
        assert_eq!(
            col_names("batch", "jobs"),
            ["Name", "Status", "Completions", "Duration", "Age", "Containers", "Images", "Selector"]
        );
        let j = cells_of("batch", "jobs", json!({"metadata": meta("j"), "spec": {}}));
        assert_eq!(&j[1..4], &[json!("Running"), json!("0/1"), json!("")]);
        let j = cells_of(
            "batch",
            "jobs",
            json!({"metadata": meta("j"), "spec": {"completions": 3},
                   "status": {"succeeded": 3, "startTime": "2025-01-10T11:55:00Z", "completionTime": "2025-01-10T11:55:42Z",
                              "conditions": [{"type": "Complete", "status": "True"}]}}),
        );
        assert_eq!(&j[1..4], &[json!("Complete"), json!("3/3"), json!("42s")]);
        let j = cells_of("batch", "jobs", json!({"metadata": meta("j"), "spec": {"parallelism": 4}}));
        assert_eq!(j[2], json!("0/1 of 4"));

        assert_eq!(
            col_names("batch", "cronjobs"),
            [
                "Name",
                "Schedule",
                "Timezone",
                "Suspend",
                "Active",
                "Last Schedule",
                "Age",
                "Containers",
                "Images",
                "Selector"
            ]
        );
        let c = cells_of(
            "batch",
            "cronjobs",
            json!({"metadata": meta("cj"), "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}}}),
        );
        assert_eq!(
            c,
            vec![
                json!("cj"),
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("false"),
                json!(0),
                json!("<none>"),
                json!("5m"),
                json!("c"),
                json!("i"),
                json!("<none>")
            ]
        );
    }

    #[test]
    fn events_core_and_v1() {
        let names = col_names("", "events");
        assert_eq!(&names[..4], ["Last Seen", "Type", "Reason", "Object"]);
        assert_eq!(names[6], "Message");
        let ev = json!({"metadata": meta("e1"), "type": "Normal", "reason": "Created",
            "involvedObject": {"kind": "ConfigMap", "name": "cm1"}, "message": " made it ",
            "firstTimestamp": "2025-01-10T11:00:00Z", "lastTimestamp": "2025-01-10T11:59:00Z", "count": 4,
            "source": {"component": "kgate"}});
        let c = cells_of("", "events", ev);
        assert_eq!(
            c,
            vec![
                json!("60s"),
                json!("Normal"),
                json!("Created"),
                json!("configmap/cm1"),
                json!(""),
                json!("kgate"),
                json!("made it"),
                json!("60m"),
                json!(4),
                json!("e1")
            ]
        );
        let v1 = json!({"metadata": meta("e2"), "type": "Warning", "reason": "X", "note": "n",
            "regarding": {"kind": "Pod", "name": "p"}, "eventTime": "2025-01-10T11:59:30.000000Z",
            "reportingController": "ctl", "reportingInstance": "i-1"});
        let c = cells_of("events.k8s.io", "events", v1);
        assert_eq!(c[0], json!("30s"));
        assert_eq!(c[3], json!("pod/p"));
        assert_eq!(c[5], json!("ctl, i-1"));
        assert_eq!(c[6], json!("n"));
        assert_eq!(c[8], json!(0));
    }

    #[test]
    fn networking_policy_and_storage() {
        let c = cells_of(
            "networking.k8s.io",
            "ingresses",
            json!({"metadata": meta("ing"), "spec": {"rules": [{"host": "a"}, {"host": "b"}, {"host": "c"}, {"host": "d"}], "tls": [{}]},
                   "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}),
        );
        assert_eq!(
            c,
            vec![
                json!("ing"),
                json!("<none>"),
                json!("a,b,c + 1 more..."),
                json!("1.2.3.4"),
                json!("80, 443"),
                json!("5m")
            ]
        );
        let c = cells_of("networking.k8s.io", "ingresses", json!({"metadata": meta("i2"), "spec": {}}));
        assert_eq!(c[2], json!("*"));
        assert_eq!(c[4], json!("80"));

        let np = cells_of(
            "networking.k8s.io",
            "networkpolicies",
            json!({"metadata": meta("np"), "spec": {"podSelector": {}}}),
        );
        assert_eq!(np[1], json!("<none>"));

        let pvc = cells_of(
            "",
            "persistentvolumeclaims",
            json!({"metadata": meta("pvc"), "spec": {"storageClassName": "standard"}}),
        );
        assert_eq!(
            pvc,
            vec![
                json!("pvc"),
                json!("Pending"),
                json!(""),
                json!(""),
                json!(""),
                json!("standard"),
                json!("<unset>"),
                json!("5m"),
                json!("Filesystem")
            ]
        );
        let bound = cells_of(
            "",
            "persistentvolumeclaims",
            json!({"metadata": meta("pvc"), "spec": {"volumeName": "pv1"},
                   "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}}),
        );
        assert_eq!(&bound[1..5], &[json!("Bound"), json!("pv1"), json!("1Gi"), json!("RWO,RWX")]);
    }

    #[test]
    fn hpa_pdb_lease() {
        let c = cells_of(
            "autoscaling",
            "horizontalpodautoscalers",
            json!({"metadata": meta("h"), "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 5,
                   "minReplicas": 1, "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]}}),
        );
        assert_eq!(
            c,
            vec![
                json!("h"),
                json!("Deployment/web"),
                json!("cpu: <unknown>/80%"),
                json!("1"),
                json!(5),
                json!(0),
                json!("5m")
            ]
        );
        let c = cells_of(
            "autoscaling",
            "horizontalpodautoscalers",
            json!({"metadata": meta("h"), "spec": {"maxReplicas": 2}}),
        );
        assert_eq!(c[2], json!("<none>"));
        assert_eq!(c[3], json!("<unset>"));

        let c = cells_of(
            "policy",
            "poddisruptionbudgets",
            json!({"metadata": meta("pdb"), "spec": {"minAvailable": "50%"}}),
        );
        assert_eq!(&c[1..4], &[json!("50%"), json!("N/A"), json!(0)]);
        let c =
            cells_of("coordination.k8s.io", "leases", json!({"metadata": meta("l"), "spec": {"holderIdentity": "me"}}));
        assert_eq!(c, vec![json!("l"), json!("me"), json!("5m")]);
    }

    #[test]
    fn rbac_crd_logicalcluster() {
        assert_eq!(col_names("rbac.authorization.k8s.io", "roles"), ["Name", "Created At"]);
        let c = cells_of("rbac.authorization.k8s.io", "clusterroles", json!({"metadata": meta("admin")}));
        assert_eq!(c, vec![json!("admin"), json!("2025-01-10T11:55:00Z")]);
        let c = cells_of(
            "rbac.authorization.k8s.io",
            "rolebindings",
            json!({"metadata": meta("rb"), "roleRef": {"kind": "ClusterRole", "name": "view"},
                   "subjects": [{"kind": "User", "name": "u1"}, {"kind": "User", "name": "u2"},
                                {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]}),
        );
        assert_eq!(
            c,
            vec![json!("rb"), json!("ClusterRole/view"), json!("5m"), json!("u1, u2"), json!("g"), json!("ns/sa")]
        );
        assert_eq!(col_names("rbac.authorization.k8s.io", "clusterrolebindings").len(), 6);
        assert_eq!(col_names("apiextensions.k8s.io", "customresourcedefinitions"), ["Name", "Created At"]);
        assert_eq!(
            col_names("tenancy.kgate.dev", "logicalclusters"),
            ["Name", "Phase", "Objects", "Storage", "Namespaces", "Age", "Shard"]
        );
        let c = cells_of(
            "tenancy.kgate.dev",
            "logicalclusters",
            json!({"metadata": meta("team-a"), "status": {"phase": "Ready",
                   "usage": {"objects": 120, "storageBytes": 3_500_000, "namespaces": 4}}}),
        );
        assert_eq!(
            c,
            vec![json!("team-a"), json!("Ready"), json!(120), json!("3Mi"), json!(4), json!("5m"), json!("default")]
        );
        assert_eq!((binary_size(1023), binary_size(1536)), ("1023".to_string(), "1Ki".to_string()));
    }

    #[test]
    fn table_shape_and_include_object() {
        let objs = vec![json!({"metadata": meta("a"), "data": {}}), json!({"metadata": meta("b")})];
        let t = table(
            "",
            "configmaps",
            &objs,
            json!({"resourceVersion": "12", "continue": "", "remainingItemCount": null}),
            IncludeObject::Metadata,
            true,
            now(),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "12"}));
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 3);
        assert_eq!(t["rows"].as_array().unwrap().len(), 2);
        let o = &t["rows"][0]["object"];
        assert_eq!(o["kind"], "PartialObjectMetadata");
        assert_eq!(o["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(o["metadata"]["name"], "a");
        assert!(o.get("data").is_none());

        let t = table("", "configmaps", &objs, json!({}), IncludeObject::Object, false, now());
        assert_eq!(t["columnDefinitions"], json!([]));
        assert_eq!(t["rows"][0]["object"]["data"], json!({}));
        let t = table("", "configmaps", &[], json!(null), IncludeObject::None, true, now());
        assert_eq!(t["rows"], json!([]));
        assert_eq!(t["metadata"], json!({}));

        assert_eq!(IncludeObject::from_query(None), IncludeObject::Metadata);
        assert_eq!(IncludeObject::from_query(Some("None")), IncludeObject::None);
        assert_eq!(IncludeObject::from_query(Some("Object")), IncludeObject::Object);
    }

    #[test]
    fn missing_timestamp_is_unknown() {
        let c = cells_of("", "configmaps", json!({"metadata": {"name": "x"}}));
        assert_eq!(c[2], json!("<unknown>"));
    }

    #[test]
    fn custom_resource_columns() {
        let cols = vec![
            json!({"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"}),
            json!({"name": "Host", "type": "string", "jsonPath": ".spec.hosts[*].name", "priority": 1}),
            json!({"name": "First", "type": "string", "jsonPath": ".spec.hosts[1].name"}),
            json!({"name": "Ready", "type": "boolean", "jsonPath": ".status.ready"}),
            json!({"name": "Score", "type": "number", "jsonPath": ".status.score"}),
            json!({"name": "Started", "type": "date", "jsonPath": ".status.started"}),
            json!({"name": "Missing", "type": "string", "jsonPath": ".status.nope"}),
            json!({"name": "Labeled", "type": "string", "jsonPath": ".metadata.labels['app.kubernetes.io/name']"}),
            json!({"name": "Obj", "type": "string", "jsonPath": ".spec.hosts[0]"}),
            json!({"name": "WrongType", "type": "integer", "jsonPath": ".status.ready"}),
        ];
        let defs = custom_columns(&cols);
        assert_eq!(defs.len(), 11);
        assert_eq!(defs[0]["format"], "name");
        assert_eq!(defs[2]["priority"], 1);
        assert_eq!(defs[1]["format"], "");
        let obj = json!({"metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "web"}},
            "spec": {"replicas": 3, "hosts": [{"name": "h1"}, {"name": "h2"}]},
            "status": {"ready": true, "score": 1.5, "started": "2025-01-10T10:00:00Z"}});
        let r = custom_row(&cols, &obj, IncludeObject::Metadata, now());
        assert_eq!(r["cells"], json!(["w", 3, "h1", "h2", true, 1.5, "120m", null, "web", "{\"name\":\"h1\"}", null]));
        assert_eq!(r["object"]["kind"], "PartialObjectMetadata");

        let defs = custom_columns(&[]);
        assert_eq!(defs[1]["name"], "Age");
        assert_eq!(defs[1]["type"], "date");
        let r = custom_row(&[], &obj, IncludeObject::None, now());
        assert_eq!(r["cells"], json!(["w", null]));
        let aged = json!({"metadata": meta("w")});
        let r = custom_row(&[], &aged, IncludeObject::None, now());
        assert_eq!(r["cells"], json!(["w", "5m"]));

        let t = custom_table(&cols, &[obj], json!({"resourceVersion": "5"}), IncludeObject::None, true, now());
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 11);
        assert_eq!(t["rows"][0]["cells"][1], json!(3));
    }

    #[test]
    fn a_row_of_custom_columns_holds_a_bounded_text() {
        // Ten thousand columns each printing a 400 KB spec would be 4 GB of text for one row.
        let cols: Vec<Value> =
            (0..10_000).map(|i| json!({"name": format!("c{i}"), "type": "string", "jsonPath": ".spec"})).collect();
        let obj = json!({"metadata": {"name": "w"}, "spec": {"blob": "é".repeat(200_000)}});
        let r = custom_row(&cols, &obj, IncludeObject::None, now());
        let cells = r["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 10_001);
        let text: usize = cells.iter().filter_map(Value::as_str).map(str::len).sum();
        assert!(text < ROW_TEXT_BYTES + 10_001 * 3, "{text} bytes of text in one row");
        let first = cells[1].as_str().unwrap();
        assert!(first.starts_with("{\"blob\":\"éé") && first.ends_with("..."), "cut and marked");
        // What fits is printed whole.
        assert_eq!(within("short", 10), "short");
        assert_eq!(json_within(&json!({"a": 1}), 7), "{\"a\":1}");
        assert_eq!(json_within(&json!({"a": 12}), 7), "{\"a\"...");
    }

    #[test]
    fn json_path_subset() {
        assert_eq!(
            parse_path("{.a.b[2]}"),
            Some(vec![Step::Field("a".into()), Step::Field("b".into()), Step::Index(2)])
        );
        assert_eq!(parse_path(".a[x]"), None);
        assert_eq!(parse_path(".a[0"), None);
        let v = json!({"a": {"b": [1, 2, 3]}});
        assert_eq!(eval_path(&v, &parse_path(".a.b[*]").unwrap()).len(), 3);
        assert!(eval_path(&v, &parse_path(".a.c").unwrap()).is_empty());
        assert_eq!(eval_path(&v, &parse_path("a.b[1]").unwrap()), vec![&json!(2)]);
    }
}
