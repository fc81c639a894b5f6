//! Static field metadata for built-in kinds: the `patchStrategy`/`patchMergeKey` Go struct tags
//! (strategic merge patch) and the `listType`/`listMapKey`/`mapType`/`structType` markers
//! (server-side apply), keyed by Go type name and JSON field name.

/// How strategic merge patch treats a list field (the Go `patchStrategy` tag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Smp {
    /// No `patchStrategy:"merge"`: the patch list replaces the live list.
    Replace,
    /// `patchStrategy:"merge"` with `patchMergeKey`: items are merged by this key.
    MergeKey(&'static str),
    /// `patchStrategy:"merge"` on a list of scalars: the lists are unioned.
    MergePrimitive,
}

/// How server-side apply treats a field (the `+listType`, `+mapType`, `+structType` markers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ssa {
    /// Maps merge field by field; lists without a marker are atomic (the default).
    Granular,
    /// The whole value is owned and replaced as one (`atomic` list, map or struct).
    Atomic,
    /// `+listType=set`: scalars identified by value.
    Set,
    /// `+listType=map` with these `+listMapKey`s, in declaration order.
    Map(&'static [&'static str]),
}

/// What is known about one field of one Go type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldMeta {
    /// Strategic merge patch behaviour for lists.
    pub smp: Smp,
    /// Server-side apply behaviour.
    pub ssa: Ssa,
    /// Go type of the value (for lists: of the items), when further fields are described.
    pub ty: Option<&'static str>,
}

/// Metadata of a field absent from the table: maps merge, lists are replaced / atomic.
pub(crate) const UNKNOWN: FieldMeta = FieldMeta { smp: Smp::Replace, ssa: Ssa::Granular, ty: None };

const fn t(ty: &'static str) -> FieldMeta {
    FieldMeta { smp: Smp::Replace, ssa: Ssa::Granular, ty: Some(ty) }
}

const fn keyed(key: &'static str, ssa_keys: &'static [&'static str], ty: Option<&'static str>) -> FieldMeta {
    FieldMeta { smp: Smp::MergeKey(key), ssa: Ssa::Map(ssa_keys), ty }
}

const ATOMIC: FieldMeta = FieldMeta { smp: Smp::Replace, ssa: Ssa::Atomic, ty: None };

const NAME: &[&str] = &["name"];
const TYPE: &[&str] = &["type"];
const IP: &[&str] = &["ip"];

/// `(Go type, JSON field, metadata)`. Types whose fields all take the defaults are omitted.
static FIELDS: &[(&str, &str, FieldMeta)] = &[
    // metav1.ObjectMeta
    ("ObjectMeta", "finalizers", FieldMeta { smp: Smp::MergePrimitive, ssa: Ssa::Set, ty: None }),
    ("ObjectMeta", "ownerReferences", keyed("uid", &["uid"], None)),
    ("ObjectMeta", "managedFields", ATOMIC),
    // Root objects.
    ("Object", "metadata", t("ObjectMeta")),
    ("Pod", "metadata", t("ObjectMeta")),
    ("Pod", "spec", t("PodSpec")),
    ("Pod", "status", t("PodStatus")),
    ("PodTemplate", "metadata", t("ObjectMeta")),
    ("PodTemplate", "template", t("PodTemplateSpec")),
    ("ReplicationController", "metadata", t("ObjectMeta")),
    ("ReplicationController", "spec", t("ReplicationControllerSpec")),
    ("ReplicationController", "status", t("ConditionsStatus")),
    ("Deployment", "metadata", t("ObjectMeta")),
    ("Deployment", "spec", t("WorkloadSpec")),
    ("Deployment", "status", t("ConditionsStatus")),
    ("ReplicaSet", "metadata", t("ObjectMeta")),
    ("ReplicaSet", "spec", t("WorkloadSpec")),
    ("ReplicaSet", "status", t("ConditionsStatus")),
    ("StatefulSet", "metadata", t("ObjectMeta")),
    ("StatefulSet", "spec", t("WorkloadSpec")),
    ("StatefulSet", "status", t("ConditionsStatus")),
    ("DaemonSet", "metadata", t("ObjectMeta")),
    ("DaemonSet", "spec", t("WorkloadSpec")),
    ("DaemonSet", "status", t("ConditionsStatus")),
    ("Job", "metadata", t("ObjectMeta")),
    ("Job", "spec", t("WorkloadSpec")),
    ("Job", "status", t("JobStatus")),
    ("CronJob", "metadata", t("ObjectMeta")),
    ("CronJob", "spec", t("CronJobSpec")),
    ("Service", "metadata", t("ObjectMeta")),
    ("Service", "spec", t("ServiceSpec")),
    ("Service", "status", t("MapConditionsStatus")),
    ("Namespace", "metadata", t("ObjectMeta")),
    ("Namespace", "status", t("MapConditionsStatus")),
    ("PersistentVolumeClaim", "metadata", t("ObjectMeta")),
    ("PersistentVolumeClaim", "status", t("MapConditionsStatus")),
    ("ServiceAccount", "metadata", t("ObjectMeta")),
    ("ServiceAccount", "secrets", keyed("name", NAME, None)),
    ("HorizontalPodAutoscaler", "metadata", t("ObjectMeta")),
    ("HorizontalPodAutoscaler", "status", t("MapConditionsStatus")),
    ("PodDisruptionBudget", "metadata", t("ObjectMeta")),
    ("PodDisruptionBudget", "spec", t("PodDisruptionBudgetSpec")),
    ("PodDisruptionBudget", "status", t("MapConditionsStatus")),
    ("CustomResourceDefinition", "metadata", t("ObjectMeta")),
    ("CustomResourceDefinition", "status", t("CrdStatus")),
    // Specs of the workload kinds (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job): they
    // share the fields that matter here.
    ("WorkloadSpec", "template", t("PodTemplateSpec")),
    ("WorkloadSpec", "selector", ATOMIC), // metav1.LabelSelector is +structType=atomic
    ("ReplicationControllerSpec", "template", t("PodTemplateSpec")),
    ("ReplicationControllerSpec", "selector", ATOMIC), // +mapType=atomic
    ("PodDisruptionBudgetSpec", "selector", ATOMIC),
    ("CronJobSpec", "jobTemplate", t("JobTemplateSpec")),
    ("JobTemplateSpec", "metadata", t("ObjectMeta")),
    ("JobTemplateSpec", "spec", t("WorkloadSpec")),
    ("PodTemplateSpec", "metadata", t("ObjectMeta")),
    ("PodTemplateSpec", "spec", t("PodSpec")),
    // core/v1 PodSpec
    ("PodSpec", "containers", keyed("name", NAME, Some("Container"))),
    ("PodSpec", "initContainers", keyed("name", NAME, Some("Container"))),
    ("PodSpec", "ephemeralContainers", keyed("name", NAME, Some("Container"))),
    ("PodSpec", "volumes", keyed("name", NAME, None)), // also retainKeys
    ("PodSpec", "imagePullSecrets", keyed("name", NAME, None)),
    ("PodSpec", "hostAliases", keyed("ip", IP, None)),
    ("PodSpec", "topologySpreadConstraints", keyed("topologyKey", &["topologyKey", "whenUnsatisfiable"], None)),
    ("PodSpec", "resourceClaims", keyed("name", NAME, None)), // also retainKeys
    ("PodSpec", "schedulingGates", keyed("name", NAME, None)),
    ("PodSpec", "nodeSelector", ATOMIC), // +mapType=atomic
    ("PodSpec", "tolerations", ATOMIC),
    ("PodSpec", "readinessGates", ATOMIC),
    // core/v1 Container and EphemeralContainer
    ("Container", "ports", keyed("containerPort", &["containerPort", "protocol"], None)),
    ("Container", "env", keyed("name", NAME, None)),
    ("Container", "volumeMounts", keyed("mountPath", &["mountPath"], None)),
    ("Container", "volumeDevices", keyed("devicePath", &["devicePath"], None)),
    ("Container", "resources", t("ResourceRequirements")),
    ("ResourceRequirements", "claims", FieldMeta { smp: Smp::Replace, ssa: Ssa::Map(NAME), ty: None }),
    // core/v1 PodStatus
    ("PodStatus", "conditions", keyed("type", TYPE, None)),
    ("PodStatus", "podIPs", keyed("ip", IP, None)),
    ("PodStatus", "hostIPs", keyed("ip", IP, None)),
    ("PodStatus", "resourceClaimStatuses", keyed("name", NAME, None)),
    // core/v1 ServiceSpec
    ("ServiceSpec", "ports", keyed("port", &["port", "protocol"], None)),
    ("ServiceSpec", "selector", ATOMIC), // +mapType=atomic
    // Status types whose conditions merge by type. Workload conditions are +listType=map in
    // apps/v1 only through the patch tags; SSA treats tagged lists as maps too.
    ("ConditionsStatus", "conditions", keyed("type", TYPE, None)),
    ("MapConditionsStatus", "conditions", keyed("type", TYPE, None)),
    // batch/v1 JobStatus.conditions: patchStrategy merge, but +listType=atomic.
    ("JobStatus", "conditions", FieldMeta { smp: Smp::MergeKey("type"), ssa: Ssa::Atomic, ty: None }),
    // apiextensions CRD status conditions: +listType=map, no patch tags.
    ("CrdStatus", "conditions", FieldMeta { smp: Smp::Replace, ssa: Ssa::Map(TYPE), ty: None }),
];

/// Built-in kinds (`group/Kind`) and the Go type describing their top level. Kinds not listed
/// here are treated as custom resources (no strategic merge patch).
static KINDS: &[(&str, &str)] = &[
    ("/Pod", "Pod"),
    ("/PodTemplate", "PodTemplate"),
    ("/ReplicationController", "ReplicationController"),
    ("/Service", "Service"),
    ("/Namespace", "Namespace"),
    ("/PersistentVolumeClaim", "PersistentVolumeClaim"),
    ("/ServiceAccount", "ServiceAccount"),
    ("/ConfigMap", "Object"),
    ("/Secret", "Object"),
    ("/Event", "Object"),
    ("/Endpoints", "Object"),
    ("/LimitRange", "Object"),
    ("/ResourceQuota", "Object"),
    ("/Node", "Object"),
    ("/PersistentVolume", "Object"),
    ("apps/Deployment", "Deployment"),
    ("apps/ReplicaSet", "ReplicaSet"),
    ("apps/StatefulSet", "StatefulSet"),
    ("apps/DaemonSet", "DaemonSet"),
    ("apps/ControllerRevision", "Object"),
    ("batch/Job", "Job"),
    ("batch/CronJob", "CronJob"),
    ("autoscaling/HorizontalPodAutoscaler", "HorizontalPodAutoscaler"),
    ("autoscaling/Scale", "Object"),
    ("policy/PodDisruptionBudget", "PodDisruptionBudget"),
    ("apiextensions.k8s.io/CustomResourceDefinition", "CustomResourceDefinition"),
    ("events.k8s.io/Event", "Object"),
    ("coordination.k8s.io/Lease", "Object"),
    ("rbac.authorization.k8s.io/Role", "Object"),
    ("rbac.authorization.k8s.io/RoleBinding", "Object"),
    ("rbac.authorization.k8s.io/ClusterRole", "Object"),
    ("rbac.authorization.k8s.io/ClusterRoleBinding", "Object"),
    ("networking.k8s.io/Ingress", "Object"),
    ("networking.k8s.io/IngressClass", "Object"),
    ("networking.k8s.io/NetworkPolicy", "Object"),
    ("discovery.k8s.io/EndpointSlice", "Object"),
    ("storage.k8s.io/StorageClass", "Object"),
    ("scheduling.k8s.io/PriorityClass", "Object"),
    ("authorization.k8s.io/SelfSubjectAccessReview", "Object"),
    ("authorization.k8s.io/SelfSubjectRulesReview", "Object"),
    ("authentication.k8s.io/SelfSubjectReview", "Object"),
    ("authentication.k8s.io/TokenRequest", "Object"),
];

/// The Go type of a built-in kind's top level, or `None` for kinds treated as custom resources.
pub(crate) fn root_type(kind_key: &str) -> Option<&'static str> {
    KINDS.iter().find(|(k, _)| *k == kind_key).map(|(_, ty)| *ty)
}

/// Metadata of `field` inside a value of Go type `ty` (`UNKNOWN` when not described).
pub(crate) fn field(ty: Option<&str>, field: &str) -> FieldMeta {
    let Some(ty) = ty else { return UNKNOWN };
    FIELDS
        .iter()
        .find(|(t, f, _)| *t == ty && *f == field)
        .map(|(_, _, m)| *m)
        // Undescribed fields behave like untagged Go fields: maps merge, lists are atomic.
        .unwrap_or(UNKNOWN)
}

/// Field names that are free-form string maps rather than structs; server-side apply records
/// them as members of their own (`.`) when an update creates them.
pub(crate) fn is_free_form_map(name: &str) -> bool {
    matches!(
        name,
        "labels"
            | "annotations"
            | "data"
            | "binaryData"
            | "stringData"
            | "selector"
            | "nodeSelector"
            | "matchLabels"
            | "limits"
            | "requests"
            | "capacity"
            | "allocatable"
            | "hard"
            | "used"
            | "parameters"
            | "overhead"
    )
}
