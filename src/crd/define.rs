//! A CustomResourceDefinition object read as what it serves: names, scope and versions, turned into the
//! `ResourceDef`s the rest of kgate routes, stores and prints by; and the checks kube-apiserver makes
//! before it accepts a CRD.

use std::borrow::Cow;
use std::sync::Arc;

use serde_json::Value;

use crate::meta::{self, NameRule};
use crate::resources::{self, CustomInfo, ResourceDef, ScaleDef, ALL_VERBS};
use crate::status::{cause, Cause};
use crate::storage::Revision;

/// The finalizer kube-apiserver puts on every CRD: its objects are deleted before it goes.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";
/// Groups that need this annotation (kube-apiserver's API review rule).
const APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

/// One version of a CRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdVersion {
    /// `v1`, `v1beta1`.
    pub name: String,
    /// Served by the API.
    pub served: bool,
    /// The version objects are stored as.
    pub storage: bool,
    /// Has a `/status` subresource.
    pub status: bool,
    /// The `/scale` subresource's paths.
    pub scale: Option<ScaleDef>,
    /// `additionalPrinterColumns` (see `CustomInfo::columns`).
    pub columns: Arc<Vec<Value>>,
    /// `selectableFields`, as field selectors name them (`spec.color`).
    pub selectable: Arc<Vec<String>>,
}

/// What a CRD serves, without its schemas (they are read when needed; see `CrdIndex::schema`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crd {
    /// `<plural>.<group>`.
    pub name: String,
    /// API group.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Plural (URL segment).
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// kubectl short names.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Every version, served or not.
    pub versions: Vec<CrdVersion>,
    /// The revision the CRD was last written at.
    pub revision: Revision,
    /// Being deleted.
    pub terminating: bool,
    /// Still holds the cleanup finalizer (its objects may still exist).
    pub needs_cleanup: bool,
}

fn strs(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
}

/// A CRD's JSONPath-style path (`.spec.replicas`) as the dotted path the registry walks.
fn dotted(path: &str) -> Cow<'static, str> {
    Cow::Owned(path.trim_start_matches('.').to_string())
}

impl Crd {
    /// Read a stored CRD; `None` when it does not describe a servable type (it was validated on write,
    /// so only a corrupt or foreign object gets here).
    pub fn parse(obj: &Value, revision: Revision) -> Option<Crd> {
        let spec = obj.get("spec")?;
        let names = spec.get("names")?;
        let group = spec.get("group")?.as_str()?.to_string();
        let kind = names.get("kind")?.as_str()?.to_string();
        let plural = names.get("plural")?.as_str()?.to_string();
        let singular = names
            .get("singular")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .unwrap_or_else(|| kind.to_ascii_lowercase());
        let versions = spec
            .get("versions")?
            .as_array()?
            .iter()
            .filter_map(|v| {
                let subs = v.get("subresources");
                let scale = subs.and_then(|s| s.get("scale")).map(|sc| ScaleDef {
                    spec_replicas: dotted(sc["specReplicasPath"].as_str().unwrap_or(".spec.replicas")),
                    status_replicas: dotted(sc["statusReplicasPath"].as_str().unwrap_or(".status.replicas")),
                    selector: dotted(sc["labelSelectorPath"].as_str().unwrap_or("")),
                });
                Some(CrdVersion {
                    name: v.get("name")?.as_str()?.to_string(),
                    served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                    storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                    status: subs.and_then(|s| s.get("status")).is_some(),
                    scale,
                    columns: Arc::new(
                        v.get("additionalPrinterColumns").and_then(Value::as_array).cloned().unwrap_or_default(),
                    ),
                    selectable: Arc::new(
                        v["selectableFields"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|f| f["jsonPath"].as_str())
                            .map(|p| dotted(p).into_owned())
                            .collect(),
                    ),
                })
            })
            .collect();
        Some(Crd {
            name: meta::meta_str(obj, "name")?.to_string(),
            group,
            kind,
            plural,
            singular,
            short_names: strs(&names["shortNames"]),
            categories: strs(&names["categories"]),
            namespaced: spec.get("scope").and_then(Value::as_str) != Some("Cluster"),
            versions,
            revision,
            terminating: meta::meta_str(obj, "deletionTimestamp").is_some(),
            needs_cleanup: meta::finalizers(obj).iter().any(|f| f == CLEANUP_FINALIZER),
        })
    }

    /// The resource type one served version is.
    pub fn def(&self, version: &CrdVersion) -> ResourceDef {
        ResourceDef {
            group: self.group.clone(),
            version: version.name.clone(),
            kind: self.kind.clone(),
            plural: self.plural.clone(),
            singular: self.singular.clone(),
            namespaced: self.namespaced,
            short_names: self.short_names.clone(),
            categories: self.categories.clone(),
            verbs: ALL_VERBS,
            status: version.status,
            scale: version.scale.clone(),
            subresources: Vec::new(),
            storage_version_hash: self
                .versions
                .iter()
                .find(|v| v.storage)
                .map(|v| crate::resources::storage_version_hash(&self.group, &v.name, &self.kind)),
            name_rule: NameRule::Subdomain,
            root_only: false,
            custom: Some(Arc::new(CustomInfo {
                crd_name: self.name.clone(),
                crd_revision: self.revision,
                columns: version.columns.clone(),
                selectable: version.selectable.clone(),
                terminating: self.terminating,
                schema: None,
            })),
        }
    }

    /// Every served version's resource type.
    pub fn defs(&self) -> impl Iterator<Item = ResourceDef> + '_ {
        self.versions.iter().filter(|v| v.served).map(|v| self.def(v))
    }

    /// Whether `version` is served with the same kind and scope as `other` (wildcard requests span the
    /// clusters whose definitions agree).
    pub fn serves_like(&self, version: &str, other: &ResourceDef) -> bool {
        self.kind == other.kind
            && self.namespaced == other.namespaced
            && self.versions.iter().any(|v| v.served && v.name == version)
    }
}

fn field(path: &str, reason: &str, message: impl Into<String>) -> Cause {
    cause(reason, path, message)
}

/// Most printer columns a version may have. kube sets no bound; here each request of the resource
/// carries them, every `kubectl get` row has a cell per column, and one tenant's CRD shares the
/// server with everyone's. Public operators' CRDs have at most a dozen.
pub const MAX_COLUMNS: usize = 100;
/// Most short names, and most categories, a CRD may have (kube sets no bound; public CRDs have a few).
pub const MAX_NAMES: usize = 64;

/// `Too many`, kube's `field.TooMany`, where a list is over a bound kgate sets.
fn too_many(path: &str, n: usize, max: usize) -> Cause {
    field(path, "FieldValueTooMany", format!("Too many: {n}: must have at most {max} items"))
}

/// A CRD's `shortNames` or `categories`: each a DNS-1035 label, as kube checks them.
fn names_list(list: &Value, path: &str, out: &mut Vec<Cause>) {
    let items = list.as_array().map_or(&[][..], Vec::as_slice);
    if items.len() > MAX_NAMES {
        out.push(too_many(path, items.len(), MAX_NAMES));
        return;
    }
    for (i, n) in items.iter().enumerate() {
        let n = n.as_str().unwrap_or_default();
        let errs = meta::dns1035_label_errors(n);
        if !errs.is_empty() {
            out.push(field(
                &format!("{path}[{i}]"),
                "FieldValueInvalid",
                format!("Invalid value: {n:?}: {}", errs.join(",")),
            ));
        }
    }
}

/// kube's `ValidateCustomResourceColumnDefinition` for each of a version's printer columns (at kube's
/// paths, `JSONPath` spelled as its Go field), under `MAX_COLUMNS`.
/// Most `selectableFields` of a version, as kube allows.
const MAX_SELECTABLE: usize = 8;

/// kube's checks of a version's `selectableFields`: at most 8, each a simple path (no array
/// notation) to a string, boolean or integer field of the schema outside `metadata`, none twice.
fn selectable_fields(fields: &Value, schema: &Value, path: &str, out: &mut Vec<Cause>) {
    let fields = fields.as_array().map_or(&[][..], Vec::as_slice);
    if fields.len() > MAX_SELECTABLE {
        out.push(too_many(path, fields.len(), MAX_SELECTABLE));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, f) in fields.iter().enumerate() {
        let at = format!("{path}[{i}].jsonPath");
        let json_path = f["jsonPath"].as_str().unwrap_or_default();
        if json_path.is_empty() {
            out.push(field(&at, "FieldValueRequired", "Required value"));
            continue;
        }
        let invalid = |why: &str| field(&at, "FieldValueInvalid", format!("Invalid value: {json_path:?}: {why}"));
        let segments: Vec<&str> = json_path.strip_prefix('.').unwrap_or_default().split('.').collect();
        let simple = json_path.starts_with('.')
            && segments
                .iter()
                .all(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
        if !simple {
            out.push(invalid(
                "is an invalid path: must be a simple json path starting with . and without array notation",
            ));
            continue;
        }
        // Before the schema: a CRD's schema need not declare metadata, and this says why most clearly.
        if segments[0] == "metadata" {
            out.push(invalid("must not point to fields in metadata"));
            continue;
        }
        let found = segments.iter().try_fold(schema, |at, seg| at["properties"].get(*seg));
        let Some(found) = found else {
            out.push(invalid("is an invalid path: does not refer to a valid field"));
            continue;
        };
        if !matches!(found["type"].as_str(), Some("string" | "boolean" | "integer")) {
            out.push(invalid(
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed",
            ));
        }
        if !seen.insert(segments.join(".")) {
            out.push(field(&at, "FieldValueDuplicate", format!("Duplicate value: {json_path:?}")));
        }
    }
}

fn printer_columns(columns: &Value, path: &str, out: &mut Vec<Cause>) {
    const TYPES: &str = "boolean,date,integer,number,string";
    const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
    let columns = columns.as_array().map_or(&[][..], Vec::as_slice);
    if columns.len() > MAX_COLUMNS {
        out.push(too_many(path, columns.len(), MAX_COLUMNS));
        return;
    }
    for (i, c) in columns.iter().enumerate() {
        let at = |f: &str| format!("{path}[{i}].{f}");
        let text = |f: &str| c[f].as_str().unwrap_or_default();
        if text("name").is_empty() {
            out.push(field(&at("name"), "FieldValueRequired", "Required value"));
        }
        match text("type") {
            "" => out.push(field(&at("type"), "FieldValueRequired", format!("Required value: must be one of {TYPES}"))),
            t if !TYPES.split(',').any(|k| k == t) => out.push(field(
                &at("type"),
                "FieldValueInvalid",
                format!("Invalid value: {t:?}: must be one of {TYPES}"),
            )),
            _ => {}
        }
        let format = text("format");
        if !format.is_empty() && !FORMATS.split(',').any(|k| k == format) {
            out.push(field(
                &at("format"),
                "FieldValueInvalid",
                format!("Invalid value: {format:?}: must be one of {FORMATS}"),
            ));
        }
        match text("jsonPath") {
            "" => out.push(field(&at("JSONPath"), "FieldValueRequired", "Required value")),
            p if !p.starts_with('.') => out.push(field(
                &at("JSONPath"),
                "FieldValueInvalid",
                format!("Invalid value: {p:?}: must be a simple json path starting with ."),
            )),
            _ => {}
        }
    }
}

/// kube-apiserver's CRD validation (the parts clients meet): names, group, scope, versions, schemas,
/// and on update the fields that may not change. Returns the causes of a 422.
pub fn validate(obj: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut out = Vec::new();
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let group = spec["group"].as_str().unwrap_or("");
    let plural = spec["names"]["plural"].as_str().unwrap_or("");
    let kind = spec["names"]["kind"].as_str().unwrap_or("");
    let name = meta::meta_str(obj, "name").unwrap_or("");

    if group.is_empty() {
        out.push(field("spec.group", "FieldValueRequired", "Required value"));
    } else if let Err(e) = meta::validate_dns1123_subdomain(group) {
        out.push(field("spec.group", "FieldValueInvalid", format!("Invalid value: {group:?}: {e}")));
    } else if !group.contains('.') {
        out.push(field(
            "spec.group",
            "FieldValueInvalid",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    } else if resources::is_builtin_group(group) {
        // Custom resources are stored beside the built-ins under `<group>/<plural>`; a built-in group
        // would let a tenant's CRD shadow or collide with built-in objects.
        out.push(field(
            "spec.group",
            "FieldValueInvalid",
            format!("Invalid value: {group:?}: is served by a built-in API group"),
        ));
    } else if (group == "k8s.io"
        || group.ends_with(".k8s.io")
        || group == "kubernetes.io"
        || group.ends_with(".kubernetes.io"))
        && obj["metadata"]["annotations"].get(APPROVAL_ANNOTATION).is_none()
    {
        out.push(field(
            &format!("metadata.annotations[{APPROVAL_ANNOTATION}]"),
            "FieldValueRequired",
            format!("Required value: protected groups must have approval annotation \"{APPROVAL_ANNOTATION}\", see https://github.com/kubernetes/enhancements/pull/1111"),
        ));
    }
    if plural.is_empty() {
        out.push(field("spec.names.plural", "FieldValueRequired", "Required value"));
    }
    let errs = meta::dns1035_label_errors(plural);
    if !plural.is_empty() && !errs.is_empty() {
        // kube's `IsDNS1035Label` (a letter first), its problems joined in one cause.
        let e = errs.join(",");
        out.push(field("spec.names.plural", "FieldValueInvalid", format!("Invalid value: {plural:?}: {e}")));
    }
    if let Some(s) = spec["names"]["singular"].as_str().filter(|s| !s.is_empty()) {
        let errs = meta::dns1035_label_errors(s);
        if !errs.is_empty() {
            let e = errs.join(",");
            out.push(field("spec.names.singular", "FieldValueInvalid", format!("Invalid value: {s:?}: {e}")));
        }
    }
    let kind_ok = kind.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if kind.is_empty() {
        out.push(field("spec.names.kind", "FieldValueRequired", "Required value"));
    } else if !kind_ok {
        out.push(field(
            "spec.names.kind",
            "FieldValueInvalid",
            format!(
                "Invalid value: {kind:?}: may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?"
            ),
        ));
    }
    // These checks came after kgate had taken CRDs without them: a list stored as it is stays
    // writable (its status, its finalizers), and only a list being changed is checked.
    let old_spec = old.map(|o| &o["spec"]);
    for list in ["shortNames", "categories"] {
        if old_spec.is_none_or(|o| o["names"][list] != spec["names"][list]) {
            names_list(&spec["names"][list], &format!("spec.names.{list}"), &mut out);
        }
    }
    if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
        out.push(field(
            "metadata.name",
            "FieldValueInvalid",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced") | Some("Cluster") => {}
        None => out.push(field("spec.scope", "FieldValueRequired", "Required value")),
        Some(s) => out.push(field(
            "spec.scope",
            "FieldValueNotSupported",
            format!("Unsupported value: {s:?}: supported values: \"Cluster\", \"Namespaced\""),
        )),
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    if versions.is_empty() {
        out.push(field(
            "spec.versions",
            "FieldValueInvalid",
            "Invalid value: null: must have exactly one version marked as storage version",
        ));
    } else {
        let storage = versions.iter().filter(|v| v["storage"] == true).count();
        if storage != 1 {
            out.push(field(
                "spec.versions",
                "FieldValueInvalid",
                format!(
                    "Invalid value: {}: must have exactly one version marked as storage version",
                    Value::Array(versions.clone())
                ),
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let mut unique = true;
        for (i, v) in versions.iter().enumerate() {
            let vn = v["name"].as_str().unwrap_or("");
            unique &= seen.insert(vn);
            // Version names become URL segments and Go identifiers: kube checks them as DNS-1035
            // labels (a letter first), every problem in one cause.
            let errs = meta::dns1035_label_errors(vn);
            if !errs.is_empty() {
                out.push(field(
                    &format!("spec.versions[{i}].name"),
                    "FieldValueInvalid",
                    format!("Invalid value: {vn:?}: {}", errs.join(",")),
                ));
            }
            let columns = &v["additionalPrinterColumns"];
            let stored = old_spec
                .and_then(|o| o["versions"].as_array())
                .and_then(|vs| vs.iter().find(|o| o["name"] == v["name"]));
            if stored.is_none_or(|o| o["additionalPrinterColumns"] != *columns) {
                printer_columns(columns, &format!("spec.versions[{i}].additionalPrinterColumns"), &mut out);
            }
            let selectable = &v["selectableFields"];
            if stored.is_none_or(|o| o["selectableFields"] != *selectable) {
                let schema = v["schema"].get("openAPIV3Schema").unwrap_or(&Value::Null);
                selectable_fields(selectable, schema, &format!("spec.versions[{i}].selectableFields"), &mut out);
            }
            match v["schema"].get("openAPIV3Schema") {
                None | Some(Value::Null) => out.push(field(
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "FieldValueRequired",
                    "Required value: schemas are required",
                )),
                Some(s) if s.get("type").and_then(Value::as_str) != Some("object") => out.push(field(
                    &format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                    "FieldValueInvalid",
                    "Invalid value: must be object at the root",
                )),
                Some(s) => {
                    let mut bad = Vec::new();
                    super::schema::bad_patterns(s, &format!("spec.versions[{i}].schema.openAPIV3Schema"), &mut bad);
                    for (path, pattern, why) in bad {
                        let message =
                            format!("Invalid value: {pattern:?}: must be a valid regular expression, but isn't: {why}");
                        out.push(field(&path, "FieldValueInvalid", message));
                    }
                }
            }
        }
        if !unique {
            out.push(field(
                "spec.versions",
                "FieldValueInvalid",
                format!("Invalid value: {}: must contain unique version names", Value::Array(versions.clone())),
            ));
        }
        if !versions.iter().any(|v| v["served"] == true) {
            out.push(field(
                "spec.versions",
                "FieldValueInvalid",
                "Invalid value: must have at least one served version",
            ));
        }
    }
    if let Some(old) = old {
        for (path, now, was) in [
            ("spec.group", &spec["group"], &old["spec"]["group"]),
            ("spec.names.plural", &spec["names"]["plural"], &old["spec"]["names"]["plural"]),
            ("spec.scope", &spec["scope"], &old["spec"]["scope"]),
        ] {
            if now != was {
                out.push(field(path, "FieldValueInvalid", format!("Invalid value: {now}: field is immutable")));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(group: &str, plural: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"plural": plural, "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}},
                     "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.size", "statusReplicasPath": ".status.size"}}},
                    {"name": "v1beta1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1alpha1", "served": false, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}
                ]}
        })
    }

    #[test]
    fn parses_what_it_serves() {
        let c = Crd::parse(&crd("example.com", "widgets"), 7).unwrap();
        assert_eq!((c.singular.as_str(), c.namespaced, c.revision), ("widget", true, 7));
        let defs: Vec<ResourceDef> = c.defs().collect();
        assert_eq!(defs.iter().map(|d| d.version.as_str()).collect::<Vec<_>>(), ["v1", "v1beta1"]);
        assert!(defs[0].status && !defs[1].status);
        assert_eq!(defs[0].scale.as_ref().unwrap().spec_replicas, "spec.size");
        assert_eq!(defs[0].storage_group(), "example.com");
    }

    /// Printer columns and names as kube checks them, and within kgate's bounds: one tenant's CRD
    /// must not make every request of its resource, or every row of its table, cost without end.
    #[test]
    fn printer_columns_and_names_are_checked_and_bounded() {
        let messages = |v: &Value| {
            validate(v, None).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>()
        };
        let messages_with = |v: &Value, old: &Value| {
            validate(v, Some(old)).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect::<Vec<_>>()
        };
        let mut c = crd("example.com", "widgets");
        c["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
            {"name": "Size", "type": "integer", "format": "int32", "jsonPath": ".spec.size"},
            {"name": "", "type": "text", "format": "uuid", "jsonPath": "spec.size"},
            {}
        ]);
        c["spec"]["names"]["shortNames"] = json!(["wd", "Bad_Name"]);
        assert_eq!(
            messages(&c),
            [
                "spec.names.shortNames[1]: Invalid value: \"Bad_Name\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
                "spec.versions[0].additionalPrinterColumns[1].name: Required value",
                "spec.versions[0].additionalPrinterColumns[1].type: Invalid value: \"text\": must be one of boolean,date,integer,number,string",
                "spec.versions[0].additionalPrinterColumns[1].format: Invalid value: \"uuid\": must be one of byte,date,date-time,double,float,int32,int64,password",
                "spec.versions[0].additionalPrinterColumns[1].JSONPath: Invalid value: \"spec.size\": must be a simple json path starting with .",
                "spec.versions[0].additionalPrinterColumns[2].name: Required value",
                "spec.versions[0].additionalPrinterColumns[2].type: Required value: must be one of boolean,date,integer,number,string",
                "spec.versions[0].additionalPrinterColumns[2].JSONPath: Required value",
            ]
        );
        let column = json!({"name": "A", "type": "string", "jsonPath": ".a"});
        let mut wide = crd("example.com", "widgets");
        wide["spec"]["versions"][1]["additionalPrinterColumns"] = json!(vec![column; MAX_COLUMNS + 1]);
        wide["spec"]["names"]["categories"] = json!(vec!["all"; MAX_NAMES + 1]);
        assert_eq!(
            messages(&wide),
            [
                "spec.names.categories: Too many: 65: must have at most 64 items",
                "spec.versions[1].additionalPrinterColumns: Too many: 101: must have at most 100 items",
            ]
        );
        // A CRD stored before these checks stays writable as it is; changing a list checks it.
        let mut legacy = wide.clone();
        legacy["metadata"]["labels"] = json!({"touched": "yes"});
        assert!(messages_with(&legacy, &wide).is_empty(), "{:?}", messages_with(&legacy, &wide));
        legacy["spec"]["names"]["categories"] = json!(vec!["all"; MAX_NAMES + 2]);
        assert_eq!(messages_with(&legacy, &wide), ["spec.names.categories: Too many: 66: must have at most 64 items"]);
        // The columns a request carries are the index's, not a copy.
        let parsed = Crd::parse(&c, 1).unwrap();
        let def = parsed.def(&parsed.versions[0]);
        assert!(Arc::ptr_eq(&def.custom.unwrap().columns, &parsed.versions[0].columns));
    }

    #[test]
    fn accepts_a_good_crd_and_names_what_is_wrong() {
        assert!(validate(&crd("example.com", "widgets"), None).is_empty());
        let fields = |v: &Value| validate(v, None).into_iter().map(|c| c.field).collect::<Vec<_>>();
        assert_eq!(fields(&crd("apps", "widgets")), ["spec.group"]);
        assert_eq!(fields(&crd("example", "widgets")), ["spec.group"]);
        assert_eq!(fields(&crd("x.k8s.io", "widgets")), ["metadata.annotations[api-approved.kubernetes.io]"]);
        let mut wrong_name = crd("example.com", "widgets");
        wrong_name["metadata"]["name"] = json!("gadgets.example.com");
        assert_eq!(fields(&wrong_name), ["metadata.name"]);
        let mut two_storage = crd("example.com", "widgets");
        two_storage["spec"]["versions"][1]["storage"] = json!(true);
        assert_eq!(fields(&two_storage), ["spec.versions"]);
        let mut no_schema = crd("example.com", "widgets");
        no_schema["spec"]["versions"][0]["schema"] = json!({});
        assert_eq!(fields(&no_schema), ["spec.versions[0].schema.openAPIV3Schema"]);
        // Plural and singular names are DNS-1035 labels (a letter first), as kube checks them.
        let messages = |v: &Value| validate(v, None).into_iter().map(|c| c.message).collect::<Vec<_>>();
        let mut digit_first = crd("example.com", "3widgets");
        digit_first["spec"]["names"]["singular"] = json!("3widget");
        let found = messages(&digit_first);
        assert_eq!(fields(&digit_first), ["spec.names.plural", "spec.names.singular"], "{found:?}");
        assert!(found[0].starts_with("Invalid value: \"3widgets\": a DNS-1035 label must"), "{found:?}");
        // So are version names; two versions of one name are one cause on the list, as in kube.
        let mut digit_version = crd("example.com", "widgets");
        digit_version["spec"]["versions"][0]["name"] = json!("1beta1");
        let found = messages(&digit_version);
        assert_eq!(fields(&digit_version), ["spec.versions[0].name"], "{found:?}");
        assert!(found[0].starts_with("Invalid value: \"1beta1\": a DNS-1035 label must"), "{found:?}");
        let mut twice = crd("example.com", "widgets");
        twice["spec"]["versions"][1]["name"] = twice["spec"]["versions"][0]["name"].clone();
        let found = messages(&twice);
        assert_eq!(fields(&twice), ["spec.versions"], "{found:?}");
        assert!(found[0].ends_with(": must contain unique version names"), "{found:?}");
        let mut moved = crd("example.com", "widgets");
        moved["spec"]["scope"] = json!("Cluster");
        let causes = validate(&moved, Some(&crd("example.com", "widgets")));
        assert_eq!(causes.into_iter().map(|c| c.field).collect::<Vec<_>>(), ["spec.scope"]);
    }

    #[test]
    fn refuses_patterns_that_are_not_regular_expressions() {
        let mut c = crd("example.com", "widgets");
        c["spec"]["versions"][1]["schema"]["openAPIV3Schema"] = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "good": {"type": "string", "pattern": "^[a-z]+$"},
                "bad": {"type": "string", "pattern": "^[a-z+$"},
                "list": {"type": "array", "items": {"type": "string", "pattern": "(unclosed"}},
                "either": {"anyOf": [{"pattern": "ok"}, {"pattern": "*"}]}}}}});
        let causes = validate(&c, None);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        let at = "spec.versions[1].schema.openAPIV3Schema.properties[spec]";
        assert_eq!(
            fields,
            [
                format!("{at}.properties[bad].pattern"),
                format!("{at}.properties[either].anyOf[1].pattern"),
                format!("{at}.properties[list].items.pattern"),
            ]
        );
        assert_eq!(
            causes[0].message,
            "Invalid value: \"^[a-z+$\": must be a valid regular expression, but isn't: unclosed character class"
        );
        assert!(!causes[0].message.contains('\n'), "{}", causes[0].message);
    }
}
