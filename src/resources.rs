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

/// A subresource other than `status` and `scale`, as discovery lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subresource {
    /// `eviction`.
    pub name: String,
    /// Group and version of the kind it answers, empty when they are the parent's.
    pub group: String,
    /// See `group`.
    pub version: String,
    /// Kind it answers (`Eviction`).
    pub kind: String,
    /// Verbs it serves.
    pub verbs: Vec<String>,
}

/// What a custom resource's definition adds to its `ResourceDef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CustomInfo {
    /// The CustomResourceDefinition's name (`<plural>.<group>`).
    pub crd_name: String,
    /// The CRD's revision this was read from: schemas cached under an older one are stale.
    pub crd_revision: i64,
    /// `additionalPrinterColumns` of this version, shared with the CRD index: every request of the
    /// resource carries them, and a copy each would cost what the CRD's author chose.
    pub columns: Arc<Vec<Value>>,
    /// `selectableFields` of this version, as field selectors name them (`spec.color`).
    pub selectable: Arc<Vec<String>>,
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
    /// Subresources other than `status` and `scale` (`pods/eviction`, `serviceaccounts/token`, ...).
    pub subresources: Vec<Subresource>,
    /// kube's `storageVersionHash` for discovery; set for built-ins.
    pub storage_version_hash: Option<String>,
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

    /// The storage group segment: `core` for the legacy group (DESIGN.md section 2), and for
    /// `events.k8s.io` Events, which kube stores as core Events (`registry::convert`).
    pub fn storage_group(&self) -> &str {
        match (self.group.as_str(), self.plural.as_str()) {
            ("", _) | ("events.k8s.io", "events") if self.custom.is_none() => "core",
            _ => &self.group,
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

/// The kube minor whose built-in APIs kgate serves.
pub const KUBE_MINOR: &str = "1.33";

/// kube-apiserver's default APIs of `KUBE_MINOR`, derived from kube's own discovery documents by
/// `resources/gen_kube_api.py`. Following a newer minor is a new table, not new code.
const KUBE_TABLE: &str = include_str!("resources/kube-1.33.tsv");

/// Name validation that kube's registry applies beyond the default DNS subdomain rule.
const NAME_RULES: &[(&str, &str, NameRule)] = &[
    ("", "namespaces", NameRule::Label),
    ("", "services", NameRule::Label1035),
    ("rbac.authorization.k8s.io", "roles", NameRule::PathSegment),
    ("rbac.authorization.k8s.io", "rolebindings", NameRule::PathSegment),
    ("rbac.authorization.k8s.io", "clusterroles", NameRule::PathSegment),
    ("rbac.authorization.k8s.io", "clusterrolebindings", NameRule::PathSegment),
    ("certificates.k8s.io", "certificatesigningrequests", NameRule::PathSegment),
    // An IPAddress is named by its IP, IPv6's colons included: `validation::ip_address` checks it.
    ("networking.k8s.io", "ipaddresses", NameRule::PathSegment),
];

/// The standard verbs, so that rows can share `&'static` verb lists.
const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// A verb list of the table as a `'static` slice: the table is read once per process.
fn static_verbs(list: &str) -> &'static [&'static str] {
    let verbs: Vec<&'static str> = list.split(',').filter_map(|v| VERBS.iter().find(|k| **k == v).copied()).collect();
    match verbs.as_slice() {
        v if v == ALL_VERBS => ALL_VERBS,
        v if v == CREATE_ONLY => CREATE_ONLY,
        _ => Box::leak(verbs.into_boxed_slice()),
    }
}

/// One row of the table.
struct Row<'a> {
    group: &'a str,
    version: &'a str,
    name: &'a str,
    kind: &'a str,
    kind_gv: &'a str,
    namespaced: bool,
    verbs: &'a str,
    short: &'a str,
    categories: &'a str,
    hash: &'a str,
}

fn rows(table: &str) -> impl Iterator<Item = Row<'_>> {
    table.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(|line| {
        let f: Vec<&str> = line.split('\t').map(|f| if f == "-" { "" } else { f }).collect();
        assert_eq!(f.len(), 10, "malformed API table row: {line}");
        Row {
            group: f[0],
            version: f[1],
            name: f[2],
            kind: f[3],
            kind_gv: f[4],
            namespaced: f[5] == "Namespaced",
            verbs: f[6],
            short: f[7],
            categories: f[8],
            hash: f[9],
        }
    })
}

fn list(s: &str) -> Vec<String> {
    s.split(',').filter(|x| !x.is_empty()).map(str::to_string).collect()
}

/// The built-in resources a table describes, with their subresources.
fn from_table(table: &str) -> Vec<ResourceDef> {
    let mut defs: Vec<ResourceDef> = Vec::new();
    for r in rows(table) {
        if let Some((parent, sub)) = r.name.split_once('/') {
            let Some(d) = defs.iter_mut().find(|d| d.group == r.group && d.version == r.version && d.plural == parent)
            else {
                continue;
            };
            let (group, version) = r.kind_gv.split_once('/').unwrap_or(("", ""));
            match sub {
                "status" => d.status = true,
                "scale" => d.scale = Some(DEFAULT_SCALE),
                _ => d.subresources.push(Subresource {
                    name: sub.to_string(),
                    group: group.to_string(),
                    version: version.to_string(),
                    kind: r.kind.to_string(),
                    verbs: list(r.verbs),
                }),
            }
            continue;
        }
        let name_rule = NAME_RULES
            .iter()
            .find(|(g, p, _)| *g == r.group && *p == r.name)
            .map(|(_, _, rule)| *rule)
            .unwrap_or(NameRule::Subdomain);
        defs.push(ResourceDef {
            group: r.group.into(),
            version: r.version.into(),
            kind: r.kind.into(),
            plural: r.name.into(),
            singular: r.kind.to_ascii_lowercase(),
            namespaced: r.namespaced,
            short_names: list(r.short),
            categories: list(r.categories),
            verbs: static_verbs(r.verbs),
            status: false,
            scale: None,
            subresources: Vec::new(),
            storage_version_hash: (!r.hash.is_empty()).then(|| r.hash.to_string()),
            name_rule,
            root_only: false,
            custom: None,
        });
    }
    defs
}

const DEFAULT_SCALE: ScaleDef = ScaleDef {
    spec_replicas: Cow::Borrowed("spec.replicas"),
    status_replicas: Cow::Borrowed("status.replicas"),
    selector: Cow::Borrowed("spec.selector"),
};

/// The tenancy group's LogicalCluster type.
pub const TENANCY_GROUP: &str = "tenancy.kgate.dev";

/// Every built-in resource, in a stable order (discovery order).
pub fn builtins() -> &'static [Arc<ResourceDef>] {
    static ALL: OnceLock<Vec<Arc<ResourceDef>>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut defs: Vec<Arc<ResourceDef>> = from_table(KUBE_TABLE).into_iter().map(Arc::new).collect();
        defs.push(Arc::new(ResourceDef {
            group: TENANCY_GROUP.into(),
            version: "v1alpha1".into(),
            kind: "LogicalCluster".into(),
            plural: "logicalclusters".into(),
            singular: "logicalcluster".into(),
            namespaced: false,
            short_names: Vec::new(),
            categories: Vec::new(),
            verbs: ALL_VERBS,
            status: true,
            scale: None,
            subresources: Vec::new(),
            storage_version_hash: None,
            name_rule: NameRule::Label,
            root_only: true,
            custom: None,
        }));
        defs
    })
}

/// kube's `storageVersionHash`: the first 8 bytes of the SHA-256 of `group/version/kind` of the
/// version objects are stored in, in standard base64. Clients only compare it for changes.
pub fn storage_version_hash(group: &str, version: &str, kind: &str) -> String {
    use base64::Engine;
    use sha2::Digest;
    let sum = sha2::Sha256::digest(format!("{group}/{version}/{kind}").as_bytes());
    base64::engine::general_purpose::STANDARD.encode(&sum[..8])
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

    /// The table's hashes are kube's own: each is the hash of its row's kind in the version kube stores
    /// it in (an older one for some: CRDs are stored as v1beta1) or of the kind it shares storage with
    /// (events.k8s.io events are stored as core events). A row copied wrong fails here.
    #[test]
    fn storage_version_hashes_are_kubes() {
        assert_eq!(storage_version_hash("apps", "v1", "Deployment"), "8aSe+NMegvE=");
        let versions = ["v1", "v2", "v1beta1", "v1beta2", "v1beta3"];
        let all: Vec<String> = builtins()
            .iter()
            .flat_map(|d| {
                versions.iter().flat_map(move |v| {
                    [storage_version_hash(&d.group, v, &d.kind), storage_version_hash("", v, &d.kind)]
                })
            })
            .collect();
        for d in builtins().iter().filter(|d| d.group != TENANCY_GROUP) {
            let h = d.storage_version_hash.as_deref().unwrap_or_default();
            if d.is_virtual() || d.plural == "bindings" || d.plural == "componentstatuses" {
                assert_eq!(h, "", "{}", d.plural);
            } else {
                assert!(all.iter().any(|x| x == h), "{}/{}: {h}", d.group, d.plural);
            }
        }
    }

    #[test]
    fn the_table_serves_kubes_default_apis() {
        for (g, v, p) in [
            ("", "v1", "nodes"),
            ("", "v1", "replicationcontrollers"),
            ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"),
            ("apiregistration.k8s.io", "v1", "apiservices"),
            ("networking.k8s.io", "v1", "servicecidrs"),
        ] {
            assert!(find(g, v, p).is_some(), "{p}");
        }
        let rc = find("", "v1", "replicationcontrollers").unwrap();
        assert!(rc.status && rc.scale.is_some() && rc.categories == ["all"] && rc.short_names == ["rc"]);
        let pods = find("", "v1", "pods").unwrap();
        let eviction = pods.subresources.iter().find(|s| s.name == "eviction").unwrap();
        assert_eq!(
            (eviction.group.as_str(), eviction.version.as_str(), eviction.verbs.as_slice()),
            ("policy", "v1", &["create".to_string()][..])
        );
        assert_eq!(find("", "v1", "namespaces").unwrap().name_rule, NameRule::Label);
        assert_eq!(find("", "v1", "componentstatuses").unwrap().verbs, ["get", "list"]);
        let hpa = find("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        assert!(hpa.status && hpa.categories == ["all"] && hpa.short_names == ["hpa"]);
        assert!(find("", "v1", "pods").unwrap().subresources.iter().all(|s| s.name != "checkpoint"));
    }

    #[test]
    fn tenancy_only_in_root() {
        assert!(for_cluster("root").any(|d| d.plural == "logicalclusters"));
        assert!(!for_cluster("team-a").any(|d| d.plural == "logicalclusters"));
    }
}
