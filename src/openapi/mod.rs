//! OpenAPI v3 documents for kgate's built-in kinds (from k8s-openapi's schemars schemas) and
//! schema-driven checks of request bodies: unknown fields, pruning and JSON type errors.

mod kinds;
mod merge_table;
mod paths;
mod schema;
pub mod v2;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha512};

pub use paths::ResourceOps;
use schema::Strategy;

/// Errors from building documents out of caller-supplied schemas.
#[derive(Debug, thiserror::Error)]
pub enum OpenApiError {
    /// A custom kind's schema is not a JSON object.
    #[error("schema for kind {0} is not a JSON object")]
    NotAnObject(String),
}

/// A kind whose schema the caller supplies (a CRD version's `openAPIV3Schema`).
pub struct CustomKind<'a> {
    /// Kind name, e.g. `CronTab`.
    pub kind: &'a str,
    /// The structural schema of the whole object.
    pub schema: &'a Value,
}

/// Where a kind's schema lives and how it may be patched.
#[derive(Debug, Clone)]
struct KindInfo {
    group: String,
    version: String,
    kind: String,
    def: String,
    /// Strategic merge patch is only offered for kinds whose Go types define it.
    strategic: bool,
}

/// All built-in schemas, built once and shared; per-group-version documents are cut from it.
pub struct Builtins {
    schemas: BTreeMap<String, Value>,
    /// Direct `$ref` targets of each schema, to compute a document's closure cheaply.
    refs: HashMap<String, Vec<String>>,
    /// By kind name, then its groups and versions (a few at most): looked up on every write, by a
    /// `&str` that needs no key built.
    kinds: HashMap<String, Vec<KindInfo>>,
}

/// Definition name of `metav1.DeleteOptions`.
const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

impl Builtins {
    /// The shared instance, built on first use.
    pub fn get() -> &'static Builtins {
        static CELL: OnceLock<Builtins> = OnceLock::new();
        CELL.get_or_init(Builtins::build)
    }

    fn build() -> Builtins {
        let mut gen = SchemaSettings::openapi3().with(|s| s.meta_schema = None).into_generator();
        let entries = kinds::register(&mut gen);
        kinds::register_support(&mut gen);
        let mut schemas: BTreeMap<String, Value> = gen.take_definitions(true).into_iter().collect();
        schema::normalize(&mut schemas);

        let mut kinds = HashMap::new();
        let mut gvs = BTreeSet::new();
        let mut add_kind = |schemas: &mut BTreeMap<String, Value>,
                            group: &str,
                            version: &str,
                            kind: &str,
                            def: &str,
                            strategic: bool| {
            if let Some(s) = schemas.get_mut(def) {
                schema::add_gvk(s, group, version, kind);
            }
            let info = KindInfo {
                group: group.into(),
                version: version.into(),
                kind: kind.into(),
                def: def.into(),
                strategic,
            };
            let same: &mut Vec<KindInfo> = kinds.entry(kind.to_string()).or_default();
            match same.iter_mut().find(|k| k.group == group && k.version == version) {
                Some(k) => *k = info,
                None => same.push(info),
            }
        };
        for e in &entries {
            add_kind(&mut schemas, e.group, e.version, e.kind, &e.def, true);
            gvs.insert((e.group, e.version));
            if e.listable {
                let list_kind = format!("{}List", e.kind);
                let list_def = format!("{}List", e.def);
                schemas.insert(list_def.clone(), schema::list_schema(e.kind, &e.def));
                add_kind(&mut schemas, e.group, e.version, &list_kind, &list_def, true);
            }
        }

        let (tg, tv) = (kinds::TENANCY_GROUP, kinds::TENANCY_VERSION);
        let lc = kinds::LOGICAL_CLUSTER_DEF;
        schemas.insert(lc.into(), kinds::logical_cluster_schema());
        add_kind(&mut schemas, tg, tv, "LogicalCluster", lc, false);
        let lc_list = format!("{lc}List");
        schemas.insert(lc_list.clone(), schema::list_schema("LogicalCluster", lc));
        add_kind(&mut schemas, tg, tv, "LogicalClusterList", &lc_list, false);
        gvs.insert((tg, tv));

        // kube-apiserver tags DeleteOptions with every group-version that accepts it.
        if let Some(d) = schemas.get_mut(DELETE_OPTIONS) {
            for (g, v) in &gvs {
                schema::add_gvk(d, g, v, "DeleteOptions");
            }
        }

        let refs = schemas
            .iter()
            .map(|(name, s)| {
                let mut out = Vec::new();
                schema::collect_refs(s, &mut out);
                (name.clone(), out)
            })
            .collect();
        Builtins { schemas, refs, kinds }
    }

    /// Finds a kind by its group/version/kind.
    fn kind(&self, group: &str, version: &str, kind: &str) -> Option<&KindInfo> {
        self.kinds.get(kind)?.iter().find(|k| k.group == group && k.version == version)
    }

    /// Finds a subresource's kind, which may live in another group (e.g. `TokenRequest` served
    /// under `serviceaccounts/token` in the core group).
    fn kind_anywhere(&self, group: &str, version: &str, kind: &str) -> Option<&KindInfo> {
        self.kind(group, version, kind).or_else(|| match self.kinds.get(kind)?.as_slice() {
            [only] => Some(only),
            _ => None,
        })
    }

    /// Whether a schema is known for this group/version/kind (including `<Kind>List`).
    pub fn has_kind(&self, group: &str, version: &str, kind: &str) -> bool {
        self.kind(group, version, kind).is_some()
    }

    /// The OpenAPI v3 document for one group/version ("" group = core, path "api/v1"; else
    /// "apis/<g>/<v>").
    pub fn gv_document(&self, group: &str, version: &str, resources: &[ResourceOps]) -> Value {
        self.gv_document_with(group, version, resources, &[]).unwrap_or_else(|_| self.empty_document())
    }

    /// Like [`Builtins::gv_document`], with schemas for kinds that are not built in (CRDs).
    /// Custom kinds only advertise JSON patch, merge patch and apply patch.
    pub fn gv_document_with(
        &self,
        group: &str,
        version: &str,
        resources: &[ResourceOps],
        custom: &[CustomKind],
    ) -> Result<Value, OpenApiError> {
        let mut extra: BTreeMap<String, Value> = BTreeMap::new();
        let mut custom_infos = Vec::new();
        for c in custom {
            let def = custom_def_name(group, version, c.kind);
            let s = custom_schema(c, group, version)?;
            extra.insert(def.clone(), s);
            let mut list = schema::list_schema(c.kind, &def);
            schema::add_gvk(&mut list, group, version, &format!("{}List", c.kind));
            extra.insert(format!("{def}List"), list);
            custom_infos.push(KindInfo {
                group: group.into(),
                version: version.into(),
                kind: c.kind.into(),
                def,
                strategic: false,
            });
        }

        let mut paths = Map::new();
        let scale = self.kind("autoscaling", "v1", "Scale");
        for r in resources {
            // A subresource's operations are named after the kind it belongs to (kube's
            // `createCoreV1NamespacedPodEviction`), whatever kind its body is.
            let owner = match r.plural.split_once('/') {
                Some((parent, _)) => resources.iter().find(|p| p.plural == parent).map_or(r.kind, |p| p.kind),
                None => r.kind,
            };
            if paths::add_stream(&mut paths, group, version, r, owner) {
                continue;
            }
            let info = if r.plural.contains('/') {
                self.kind_anywhere(group, version, r.kind)
            } else {
                self.kind(group, version, r.kind)
            };
            let info = info.or_else(|| custom_infos.iter().find(|k| k.kind == r.kind));
            let Some(info) = info else { continue };
            let list_def = format!("{}List", info.def);
            let has_list = self.schemas.contains_key(&list_def) || extra.contains_key(&list_def);
            let target = paths::Target {
                group: &info.group,
                version: &info.version,
                kind: &info.kind,
                def: &info.def,
                list_def: has_list.then_some(list_def.as_str()),
                strategic: info.strategic,
            };
            let scale_target = scale.map(|s| paths::Target {
                group: &s.group,
                version: &s.version,
                kind: &s.kind,
                def: &s.def,
                list_def: None,
                strategic: info.strategic,
            });
            paths::add_resource(&mut paths, group, version, r, owner, &target, scale_target.as_ref());
        }

        let paths = Value::Object(paths);
        let mut pending = Vec::new();
        schema::collect_refs(&paths, &mut pending);
        for s in extra.values() {
            schema::collect_refs(s, &mut pending);
        }
        let mut included: BTreeMap<String, Value> = extra;
        while let Some(name) = pending.pop() {
            if included.contains_key(&name) {
                continue;
            }
            if let Some(s) = self.schemas.get(&name) {
                included.insert(name.clone(), s.clone());
                pending.extend(self.refs[&name].iter().cloned());
            }
        }
        Ok(document(paths, included))
    }

    fn empty_document(&self) -> Value {
        document(json!({}), BTreeMap::new())
    }

    /// The schema of a kind, if known.
    fn root_schema(&self, group: &str, version: &str, kind: &str) -> Option<&Value> {
        self.schemas.get(&self.kind(group, version, kind)?.def)
    }

    /// Paths of fields present in `obj` but not in the schema of group/version/kind, formatted
    /// as kube-apiserver's strict decoder does (`spec.template.spec.containers[0].imagee`), the first
    /// `MAX_FIELD_ERRORS` of them (all that an error reports). Empty if the kind is unknown.
    pub fn unknown_fields(&self, group: &str, version: &str, kind: &str, obj: &Value) -> Vec<String> {
        let Some(root) = self.root_schema(group, version, kind) else {
            return Vec::new();
        };
        let limit = crate::codec::MAX_FIELD_ERRORS;
        validate::unknown_paths(&self.schemas, root, obj, limit).iter().map(|p| validate::format_path(p)).collect()
    }

    /// Removes the fields [`Builtins::unknown_fields`] reports (fieldValidation=Ignore/Warn:
    /// the real server drops them).
    pub fn prune(&self, group: &str, version: &str, kind: &str, obj: &mut Value) {
        let Some(root) = self.root_schema(group, version, kind) else {
            return;
        };
        validate::prune_unknown(&self.schemas, root, obj);
    }

    /// Values whose JSON type does not match the schema, worded like Go's `encoding/json`
    /// errors that kube-apiserver returns (`json: cannot unmarshal number into Go struct field
    /// ConfigMap.data of type string`).
    pub fn type_errors(&self, group: &str, version: &str, kind: &str, obj: &Value) -> Vec<String> {
        let Some(info) = self.kind(group, version, kind) else {
            return Vec::new();
        };
        validate::type_errors(&self.schemas, &info.def, obj)
    }

    /// The definition of a built-in kind that strategic merge patch applies to (every built-in but
    /// the LogicalCluster), in `version`, or in the first version serving it when none is given.
    pub fn strategic_root(&self, group: &str, version: Option<&str>, kind: &str) -> Option<&str> {
        let found = match version {
            Some(v) => self.kind(group, v, kind),
            None => self.kinds.get(kind)?.iter().filter(|k| k.group == group).min_by(|a, b| a.version.cmp(&b.version)),
        };
        found.filter(|k| k.strategic).map(|k| k.def.as_str())
    }

    /// Every definition, by name.
    pub fn definitions(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.schemas.iter().map(|(name, s)| (name.as_str(), s))
    }

    /// The quantities of a built-in object that kube's decoder would refuse, each as written with
    /// ParseQuantity's words.
    pub fn quantity_errors(&self, group: &str, version: &str, kind: &str, obj: &Value) -> Vec<(String, &'static str)> {
        match self.kind(group, version, kind) {
            Some(info) => validate::quantity_errors(&self.schemas, &info.def, obj),
            None => Vec::new(),
        }
    }

    /// The full OpenAPI v3 schema of a definition, e.g. `io.k8s.api.core.v1.ConfigMap`.
    pub fn schema(&self, def: &str) -> Option<&Value> {
        self.schemas.get(def)
    }
}

/// Assembles a document from its paths and schemas.
fn document(paths: Value, schemas: BTreeMap<String, Value>) -> Value {
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

/// kube-openapi's definition name for a non-built-in kind: the group reversed, then version
/// and kind (`stable.example.com`/`v1`/`CronTab` → `com.example.stable.v1.CronTab`).
pub fn custom_def_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

/// A CRD schema as kube-apiserver publishes it: `metadata` points at ObjectMeta and the kind
/// carries its group-version-kind.
fn custom_schema(c: &CustomKind, group: &str, version: &str) -> Result<Value, OpenApiError> {
    let mut s = c.schema.clone();
    let obj = s.as_object_mut().ok_or_else(|| OpenApiError::NotAnObject(c.kind.into()))?;
    obj.entry("type").or_insert_with(|| json!("object"));
    let props = obj
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| OpenApiError::NotAnObject(c.kind.into()))?;
    for field in ["apiVersion", "kind"] {
        props.entry(field).or_insert_with(|| json!({"type": "string"}));
    }
    props.insert(
        "metadata".into(),
        json!({
            "description": "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
            "allOf": [schema::ref_to("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")],
        }),
    );
    schema::add_gvk(&mut s, group, version, c.kind);
    Ok(s)
}

/// Hash of a document as kube-openapi does (uppercase hex SHA-512 of the JSON bytes); used
/// for `?hash=` and the ETag.
pub fn doc_hash(doc_bytes: &[u8]) -> String {
    hex::encode_upper(Sha512::digest(doc_bytes))
}
