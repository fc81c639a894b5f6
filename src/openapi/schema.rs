//! Turns k8s-openapi's schemars output into the OpenAPI v3 form kube-apiserver serves:
//! `#/components/schemas/<name>` refs, kube-openapi's int-or-string and Quantity shapes, and
//! the `x-kubernetes-*` list/map/patch extensions that k8s-openapi does not carry.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::merge_table::MERGE_TABLE;

/// Prefix of every schema reference in a document.
pub(super) const REF_PREFIX: &str = "#/components/schemas/";

/// How a list or map field merges (from k8s-openapi's `DeepMerge` impls).
#[derive(Debug, Clone, Copy)]
pub(super) enum Strategy {
    /// Replaced as a whole.
    Atomic,
    /// A set of scalars.
    Set,
    /// A list of objects keyed by these (Rust snake_case) fields.
    Map(&'static [&'static str]),
    /// A map replaced as a whole.
    MapAtomic,
}

/// Corrections where k8s-openapi's merge data differs from the Go struct tags kubectl sees:
/// (definition, JSON field, list-map keys or empty to keep, patch strategy or "" for none).
const LIST_OVERRIDES: &[(&str, &str, &[&str], &str)] = &[
    ("io.k8s.api.core.v1.Container", "ports", &["containerPort", "protocol"], "merge"),
    ("io.k8s.api.core.v1.EphemeralContainer", "ports", &["containerPort", "protocol"], "merge"),
    ("io.k8s.api.core.v1.ServiceSpec", "ports", &["port", "protocol"], "merge"),
    ("io.k8s.api.core.v1.PodSpec", "topologySpreadConstraints", &["topologyKey", "whenUnsatisfiable"], "merge"),
    ("io.k8s.api.core.v1.PodSpec", "volumes", &[], "merge,retainKeys"),
    ("io.k8s.api.core.v1.PodSpec", "resourceClaims", &[], "merge,retainKeys"),
    ("io.k8s.api.core.v1.ResourceRequirements", "claims", &[], ""),
    // Go tags a Deployment's strategy `retainKeys`, so that kubectl's patch to `Recreate` drops the
    // rolling update's room.
    ("io.k8s.api.apps.v1.DeploymentSpec", "strategy", &[], "retainKeys"),
    // Conditions whose Go fields carry no patch tags: a strategic merge patch replaces them.
    ("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinitionStatus", "conditions", &[], ""),
    ("io.k8s.api.certificates.v1.CertificateSigningRequestStatus", "conditions", &[], ""),
    ("io.k8s.api.admissionregistration.v1.ValidatingAdmissionPolicyStatus", "conditions", &[], ""),
];

/// Structs Go marks `+structType=atomic`: server-side apply owns each as one value, and kube's OpenAPI
/// says so on the definition (`x-kubernetes-map-type: atomic`).
const ATOMIC_STRUCTS: &[&str] = &[
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.api.core.v1.NodeSelector",
    "io.k8s.api.core.v1.NodeSelectorTerm",
    "io.k8s.api.core.v1.TopologySelectorTerm",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.TypedLocalObjectReference",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
];

/// Lists that Go declares atomic for server-side apply but still merges by key in
/// strategic merge patch.
const ATOMIC_BUT_MERGED: &[(&str, &str)] = &[
    ("io.k8s.api.core.v1.PodStatus", "hostIPs"),
    ("io.k8s.api.core.v1.PodStatus", "podIPs"),
    ("io.k8s.api.batch.v1.JobStatus", "conditions"),
];

/// Converts the definitions schemars produced into kube-apiserver's shape, in place.
pub(super) fn normalize(defs: &mut BTreeMap<String, Value>) {
    for schema in defs.values_mut() {
        strip_meta(schema);
    }
    for def in ATOMIC_STRUCTS {
        if let Some(s) = defs.get_mut(*def).and_then(Value::as_object_mut) {
            s.insert("x-kubernetes-map-type".into(), json!("atomic"));
        }
    }
    if let Some(s) = defs.get_mut("io.k8s.apimachinery.pkg.util.intstr.IntOrString") {
        s["format"] = json!("int-or-string");
        s["oneOf"] = json!([{"type": "integer"}, {"type": "string"}]);
    }
    if let Some(s) = defs.get_mut("io.k8s.apimachinery.pkg.api.resource.Quantity") {
        s["oneOf"] = json!([{"type": "string"}, {"type": "number"}]);
    }
    // Any JSON value (a schema's `default`, `enum`, `example`; schema-or-array unions): kube-openapi
    // publishes them without a type, but k8s-openapi's schemas say `object` (refusing `default: red`
    // in a CRD) or give a `oneOf` whose object arm is a bare `$ref` (refusing `items: {type: string}`).
    for any in ["JSON", "JSONSchemaPropsOrArray", "JSONSchemaPropsOrBool", "JSONSchemaPropsOrStringArray"] {
        if let Some(Value::Object(s)) =
            defs.get_mut(&format!("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.{any}"))
        {
            s.remove("type");
            s.remove("properties");
            s.remove("oneOf");
            s.insert("x-kubernetes-preserve-unknown-fields".into(), Value::Bool(true));
        }
    }
    apply_merge_table(defs);
}

/// Removes JSON-Schema-only keywords that OpenAPI 3.0 does not allow.
fn strip_meta(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("$schema");
            m.remove("$id");
            for child in m.values_mut() {
                strip_meta(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(strip_meta),
        _ => {}
    }
}

/// Compares a Rust snake_case field name with a JSON camelCase one, ignoring acronym case.
fn same_name(rust: &str, json_name: &str) -> bool {
    let a = rust.chars().filter(|c| *c != '_').map(|c| c.to_ascii_lowercase());
    let b = json_name.chars().map(|c| c.to_ascii_lowercase());
    a.eq(b)
}

/// The JSON property name of `rust` in the properties of `schema`, if any.
fn json_field(schema: &Value, rust: &str) -> Option<String> {
    schema.get("properties")?.as_object()?.keys().find(|k| same_name(rust, k)).cloned()
}

/// Name of the definition a (possibly `allOf`-wrapped) reference points to.
pub(super) fn ref_target(schema: &Value) -> Option<&str> {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        return r.strip_prefix(REF_PREFIX);
    }
    ref_target(schema.get("allOf")?.as_array()?.first()?)
}

fn apply_merge_table(defs: &mut BTreeMap<String, Value>) {
    for &(def, rust_field, strategy) in MERGE_TABLE {
        let Some(schema) = defs.get(def) else {
            continue;
        };
        let Some(field) = json_field(schema, rust_field) else {
            continue;
        };
        let keys: Vec<String> = match strategy {
            Strategy::Map(keys) => {
                let item = schema["properties"][&field].get("items").and_then(ref_target).and_then(|t| defs.get(t));
                keys.iter().map(|k| item.and_then(|i| json_field(i, k)).unwrap_or_else(|| camel(k))).collect()
            }
            _ => Vec::new(),
        };
        let Some(prop) = defs
            .get_mut(def)
            .and_then(|s| s.get_mut("properties"))
            .and_then(|p| p.get_mut(&field))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        match strategy {
            Strategy::Atomic => set_ext(prop, "x-kubernetes-list-type", json!("atomic")),
            Strategy::MapAtomic => set_ext(prop, "x-kubernetes-map-type", json!("atomic")),
            Strategy::Set => {
                set_ext(prop, "x-kubernetes-list-type", json!("set"));
                if field == "finalizers" {
                    set_ext(prop, "x-kubernetes-patch-strategy", json!("merge"));
                }
            }
            // An empty key list means k8s-openapi treats it as replace-only.
            Strategy::Map(_) if keys.is_empty() => set_ext(prop, "x-kubernetes-list-type", json!("atomic")),
            Strategy::Map(_) => {
                let atomic = ATOMIC_BUT_MERGED.contains(&(def, field.as_str()));
                if atomic {
                    set_ext(prop, "x-kubernetes-list-type", json!("atomic"));
                } else {
                    set_ext(prop, "x-kubernetes-list-type", json!("map"));
                    set_ext(prop, "x-kubernetes-list-map-keys", json!(keys));
                }
                set_ext(prop, "x-kubernetes-patch-merge-key", json!(keys[0]));
                set_ext(prop, "x-kubernetes-patch-strategy", json!("merge"));
            }
        }
    }
    for &(def, field, keys, patch) in LIST_OVERRIDES {
        let Some(prop) = defs
            .get_mut(def)
            .and_then(|s| s.pointer_mut(&format!("/properties/{field}")))
            .and_then(Value::as_object_mut)
        else {
            continue;
        };
        if !keys.is_empty() {
            prop.insert("x-kubernetes-list-map-keys".into(), json!(keys));
        }
        if patch.is_empty() {
            prop.remove("x-kubernetes-patch-strategy");
            prop.remove("x-kubernetes-patch-merge-key");
        } else {
            prop.insert("x-kubernetes-patch-strategy".into(), json!(patch));
        }
    }
}

fn set_ext(prop: &mut Map<String, Value>, key: &str, value: Value) {
    prop.insert(key.into(), value);
}

/// `container_port` → `containerPort`, for keys whose item schema could not be resolved.
fn camel(snake: &str) -> String {
    let mut out = String::new();
    let mut upper = false;
    for c in snake.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A bare `$ref` to a definition (callers wrap it in `allOf` when siblings are needed).
pub(super) fn ref_to(def: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{def}")})
}

/// The `<Kind>List` schema for a kind, as kube-apiserver publishes it.
pub(super) fn list_schema(kind: &str, item_def: &str) -> Value {
    json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string"
            },
            "items": {
                "description": format!("Items is the list of {kind} objects."),
                "type": "array",
                "items": {"default": {}, "allOf": [ref_to(item_def)]}
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string"
            },
            "metadata": {
                "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
                "default": {},
                "allOf": [ref_to("io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")]
            }
        }
    })
}

/// Definition names referenced anywhere inside `v`.
pub(super) fn collect_refs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("$ref").and_then(Value::as_str) {
                if let Some(name) = r.strip_prefix(REF_PREFIX) {
                    out.push(name.to_string());
                }
            }
            m.values().for_each(|c| collect_refs(c, out));
        }
        Value::Array(a) => a.iter().for_each(|c| collect_refs(c, out)),
        _ => {}
    }
}

/// Appends `gvk` to the `x-kubernetes-group-version-kind` list of a definition.
pub(super) fn add_gvk(schema: &mut Value, group: &str, version: &str, kind: &str) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let list = obj.entry("x-kubernetes-group-version-kind").or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        let entry = json!({"group": group, "kind": kind, "version": version});
        if !a.contains(&entry) {
            a.push(entry);
        }
    }
}
