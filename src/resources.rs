//! The resource types a logical cluster serves: built-ins from a static table, each described by one
//! `ResourceDef` that discovery, OpenAPI, routing, storage keys and printing all read.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::meta::NameRule;

/// Every verb of a normal read-write resource, as discovery lists them.
pub const ALL_VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
/// Review-style resources accept only `create`.
pub const CREATE_ONLY: &[&str] = &["create"];

/// Where the scale subresource reads and writes its fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleDef {
    /// Dotted path of the desired replica count (`spec.replicas`).
    pub spec_replicas: Cow<'static, str>,
    /// Dotted path of the observed replica count (`status.replicas`).
    pub status_replicas: Cow<'static, str>,
    /// Dotted path of the label selector: a LabelSelector object for built-ins (`spec.selector`), a
    /// selector string for custom resources (`status.selector`); empty when there is none.
    pub selector: Cow<'static, str>,
}

/// What a custom resource's definition adds to its `ResourceDef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomInfo {
    /// The CustomResourceDefinition's name (`<plural>.<group>`).
    pub crd_name: String,
    /// The CRD's revision this was read from: schemas cached under an older one are stale.
    pub crd_revision: i64,
    /// `additionalPrinterColumns` of this version.
    pub columns: Vec<Value>,
    /// The CRD is being deleted: its objects are being removed and no new ones are accepted.
    pub terminating: bool,
    /// This version's `openAPIV3Schema`, attached for writes (see `crd::CrdIndex::schema`).
    pub schema: Option<Arc<Value>>,
}

/// One resource of one group/version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceDef {
    /// API group, `""` for the legacy core group.
    pub group: String,
    /// Version (`v1`).
    pub version: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
    /// Plural resource name, the URL segment (`configmaps`).
    pub plural: String,
    /// Singular name (`configmap`).
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Verbs on the collection and items.
    pub verbs: &'static [&'static str],
    /// Has a `/status` subresource.
    pub status: bool,
    /// Has a `/scale` subresource.
    pub scale: Option<ScaleDef>,
    /// Name validation rule.
    pub name_rule: NameRule,
    /// Served only in the root cluster (tenancy types).
    pub root_only: bool,
    /// Set for custom resources (served from a CustomResourceDefinition).
    pub custom: Option<Arc<CustomInfo>>,
}

impl ResourceDef {
    /// `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The storage group segment: `core` for the legacy group (DESIGN.md section 2).
    pub fn storage_group(&self) -> &str {
        if self.group.is_empty() {
            "core"
        } else {
            &self.group
        }
    }

    /// `<Kind>List`.
    pub fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }

    /// Whether `verb` is served.
    pub fn allows(&self, verb: &str) -> bool {
        self.verbs.contains(&verb)
    }

    /// Whether objects are only created and answered, never stored (reviews).
    pub fn is_virtual(&self) -> bool {
        self.verbs == CREATE_ONLY
    }

    /// The `resource` label of metrics: the plural of a built-in type, one value for every custom
    /// resource. Tenants name their own types, so their names would leak to whoever reads the
    /// metrics and grow the series without bound.
    pub fn metric_label(&self) -> &str {
        if self.custom.is_some() {
            CUSTOM_RESOURCE_LABEL
        } else {
            &self.plural
        }
    }
}

/// The `resource` metric label of every custom resource.
pub const CUSTOM_RESOURCE_LABEL: &str = "customresources";

struct Spec {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all: bool,
    status: bool,
    scale: bool,
    verbs: &'static [&'static str],
    name_rule: NameRule,
}

const fn rw(
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
) -> Spec {
    Spec {
        group,
        version,
        kind,
        plural,
        namespaced,
        short: &[],
        all: false,
        status: false,
        scale: false,
        verbs: ALL_VERBS,
        name_rule: NameRule::Subdomain,
    }
}

const DEFAULT_SCALE: ScaleDef = ScaleDef {
    spec_replicas: Cow::Borrowed("spec.replicas"),
    status_replicas: Cow::Borrowed("status.replicas"),
    selector: Cow::Borrowed("spec.selector"),
};

fn builtin_specs() -> Vec<Spec> {
    use NameRule::*;
    let mut v = vec![
        Spec { short: &["ns"], status: true, name_rule: Label, ..rw("", "v1", "Namespace", "namespaces", false) },
        Spec { short: &["cm"], ..rw("", "v1", "ConfigMap", "configmaps", true) },
        rw("", "v1", "Secret", "secrets", true),
        Spec { short: &["sa"], ..rw("", "v1", "ServiceAccount", "serviceaccounts", true) },
        Spec {
            short: &["svc"],
            all: true,
            status: true,
            name_rule: Label,
            ..rw("", "v1", "Service", "services", true)
        },
        Spec { short: &["ev"], ..rw("", "v1", "Event", "events", true) },
        Spec { short: &["po"], all: true, status: true, ..rw("", "v1", "Pod", "pods", true) },
        Spec { short: &["pvc"], status: true, ..rw("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true) },
        Spec { short: &["quota"], status: true, ..rw("", "v1", "ResourceQuota", "resourcequotas", true) },
        Spec { short: &["limits"], ..rw("", "v1", "LimitRange", "limitranges", true) },
        Spec { short: &["ep"], ..rw("", "v1", "Endpoints", "endpoints", true) },
        rw("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", true),
        Spec { short: &["ev"], ..rw("events.k8s.io", "v1", "Event", "events", true) },
        rw("coordination.k8s.io", "v1", "Lease", "leases", true),
        Spec { name_rule: PathSegment, ..rw("rbac.authorization.k8s.io", "v1", "Role", "roles", true) },
        Spec { name_rule: PathSegment, ..rw("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true) },
        Spec { name_rule: PathSegment, ..rw("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false) },
        Spec {
            name_rule: PathSegment,
            ..rw("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false)
        },
        Spec {
            short: &["crd", "crds"],
            status: true,
            ..rw("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false)
        },
        Spec {
            short: &["deploy"],
            all: true,
            status: true,
            scale: true,
            ..rw("apps", "v1", "Deployment", "deployments", true)
        },
        Spec {
            short: &["rs"],
            all: true,
            status: true,
            scale: true,
            ..rw("apps", "v1", "ReplicaSet", "replicasets", true)
        },
        Spec {
            short: &["sts"],
            all: true,
            status: true,
            scale: true,
            ..rw("apps", "v1", "StatefulSet", "statefulsets", true)
        },
        Spec { short: &["ds"], all: true, status: true, ..rw("apps", "v1", "DaemonSet", "daemonsets", true) },
        rw("apps", "v1", "ControllerRevision", "controllerrevisions", true),
        Spec { all: true, status: true, ..rw("batch", "v1", "Job", "jobs", true) },
        Spec { short: &["cj"], all: true, status: true, ..rw("batch", "v1", "CronJob", "cronjobs", true) },
        Spec { short: &["ing"], status: true, ..rw("networking.k8s.io", "v1", "Ingress", "ingresses", true) },
        Spec { short: &["netpol"], ..rw("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", true) },
        rw("networking.k8s.io", "v1", "IngressClass", "ingressclasses", false),
        Spec {
            short: &["hpa"],
            all: true,
            status: true,
            ..rw("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", true)
        },
        Spec {
            short: &["pdb"],
            status: true,
            ..rw("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true)
        },
        Spec { short: &["pc"], ..rw("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", false) },
        Spec { short: &["sc"], ..rw("storage.k8s.io", "v1", "StorageClass", "storageclasses", false) },
    ];
    for (group, kind, plural) in [
        ("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews"),
        ("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews"),
        ("authentication.k8s.io", "TokenReview", "tokenreviews"),
    ] {
        v.push(Spec { verbs: CREATE_ONLY, ..rw(group, "v1", kind, plural, false) });
    }
    v
}

fn build(spec: Spec, root_only: bool) -> ResourceDef {
    ResourceDef {
        group: spec.group.into(),
        version: spec.version.into(),
        kind: spec.kind.into(),
        plural: spec.plural.into(),
        singular: spec.kind.to_ascii_lowercase(),
        namespaced: spec.namespaced,
        short_names: spec.short.iter().map(|s| s.to_string()).collect(),
        categories: if spec.all { vec!["all".into()] } else { vec![] },
        verbs: spec.verbs,
        status: spec.status,
        scale: if spec.scale { Some(DEFAULT_SCALE) } else { None },
        name_rule: spec.name_rule,
        root_only,
        custom: None,
    }
}

/// The tenancy group's LogicalCluster type.
pub const TENANCY_GROUP: &str = "tenancy.kgate.dev";

/// Every built-in resource, in a stable order (discovery order).
pub fn builtins() -> &'static [Arc<ResourceDef>] {
    static ALL: OnceLock<Vec<Arc<ResourceDef>>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut defs: Vec<Arc<ResourceDef>> = builtin_specs().into_iter().map(|s| Arc::new(build(s, false))).collect();
        defs.push(Arc::new(build(
            Spec {
                status: true,
                name_rule: NameRule::Label,
                ..rw(TENANCY_GROUP, "v1alpha1", "LogicalCluster", "logicalclusters", false)
            },
            true,
        )));
        defs
    })
}

/// The built-in LogicalCluster definition.
pub fn logical_cluster_def() -> Arc<ResourceDef> {
    builtins().iter().find(|d| d.group == TENANCY_GROUP).cloned().expect("tenancy type is built in")
}

/// Look a built-in up by group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
    builtins().iter().find(|d| d.group == group && d.version == version && d.plural == plural).cloned()
}

/// Whether a group is served by built-ins (custom resources may not use it).
pub fn is_builtin_group(group: &str) -> bool {
    group == "core" || builtins().iter().any(|d| d.group == group)
}

/// Look a built-in up by group and kind, any version.
pub fn find_kind(group: &str, kind: &str) -> Option<Arc<ResourceDef>> {
    builtins().iter().find(|d| d.group == group && d.kind == kind).cloned()
}

/// The resources one cluster serves: root also serves the tenancy types.
pub fn for_cluster(cluster: &str) -> impl Iterator<Item = &'static Arc<ResourceDef>> {
    let root = cluster == crate::cluster::ROOT;
    builtins().iter().filter(move |d| root || !d.root_only)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_consistent() {
        let mut seen = std::collections::HashSet::new();
        for d in builtins() {
            assert!(seen.insert((d.group.clone(), d.version.clone(), d.plural.clone())), "duplicate {}", d.plural);
            assert!(d.plural.ends_with('s'), "{}", d.plural);
        }
        assert_eq!(find("apps", "v1", "deployments").unwrap().scale, Some(DEFAULT_SCALE));
        assert_eq!(find("", "v1", "configmaps").unwrap().storage_group(), "core");
        assert!(find("", "v1", "nope").is_none());
    }

    #[test]
    fn tenancy_only_in_root() {
        assert!(for_cluster("root").any(|d| d.plural == "logicalclusters"));
        assert!(!for_cluster("team-a").any(|d| d.plural == "logicalclusters"));
    }
}
