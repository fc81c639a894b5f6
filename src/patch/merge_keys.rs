//! Field metadata for built-in kinds: the `patchStrategy`/`patchMergeKey` Go struct tags (strategic
//! merge patch) and the `listType`/`listMapKey`/`mapType`/`structType` markers (server-side apply),
//! keyed by OpenAPI definition and JSON field name, as kgate's OpenAPI publishes them.

use std::collections::HashMap;
use std::sync::OnceLock;

use serde_json::Value;

use crate::openapi::Builtins;

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

/// Every field of a built-in definition that says how it merges or what type it holds, by
/// (definition, JSON field). Read once from the OpenAPI kgate serves, so that the server merges a
/// patch by the same `x-kubernetes-patch-*` and `x-kubernetes-list-*` markers kubectl computed it
/// from; the markers themselves come from k8s-openapi, which derives them from kube's Go types.
/// The key lists are leaked once into the table's `'static` slices: built once per process.
fn table() -> &'static HashMap<(&'static str, &'static str), FieldMeta> {
    static TABLE: OnceLock<HashMap<(&'static str, &'static str), FieldMeta>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        for (def, schema) in Builtins::get().definitions() {
            let Some(props) = schema.get("properties").and_then(Value::as_object) else { continue };
            for (field, prop) in props {
                let meta = meta_of(prop);
                if meta != UNKNOWN {
                    table.insert((def, field.as_str()), meta);
                }
            }
        }
        table
    })
}

/// The definition a property's value (or, for a list, each item) is: a `$ref`, bare or in `allOf`.
fn ref_of(prop: &'static Value) -> Option<&'static str> {
    let target = |v: &'static Value| -> Option<&'static str> {
        let r = v.get("$ref").or_else(|| v.get("allOf")?.get(0)?.get("$ref"))?;
        r.as_str()?.strip_prefix("#/components/schemas/")
    };
    target(prop).or_else(|| prop.get("items").and_then(target))
}

fn meta_of(prop: &'static Value) -> FieldMeta {
    let ext = |name: &str| prop.get(name).and_then(Value::as_str);
    let ty = ref_of(prop);
    // A struct Go marks atomic is owned whole wherever it is (its definition says so).
    let atomic_struct = ty.and_then(|t| Builtins::get().schema(t)).and_then(|s| s.get("x-kubernetes-map-type"))
        == Some(&Value::String("atomic".into()));
    let keys = || -> &'static [&'static str] {
        let keys: Vec<&'static str> = prop
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        Box::leak(keys.into_boxed_slice())
    };
    let ssa = match (ext("x-kubernetes-list-type"), ext("x-kubernetes-map-type"), ext("x-kubernetes-struct-type")) {
        (Some("atomic"), _, _) | (_, Some("atomic"), _) | (_, _, Some("atomic")) => Ssa::Atomic,
        _ if atomic_struct && prop.get("items").is_none() => Ssa::Atomic,
        (Some("set"), _, _) => Ssa::Set,
        (Some("map"), _, _) => Ssa::Map(keys()),
        _ => Ssa::Granular,
    };
    let merging = ext("x-kubernetes-patch-strategy").is_some_and(|s| s.split(',').any(|s| s == "merge"));
    let smp = match (merging, ext("x-kubernetes-patch-merge-key")) {
        (true, Some(key)) => Smp::MergeKey(key),
        (true, None) => Smp::MergePrimitive,
        (false, _) => Smp::Replace,
    };
    FieldMeta { smp, ssa, ty }
}

/// The definition of a built-in kind's top level, from its key (`group/version/Kind`, or
/// `group/Kind` for its first version; `/v1/ConfigMap` for the core group), or `None` for kinds that
/// strategic merge patch does not apply to (custom resources).
pub(crate) fn root_type(kind_key: &str) -> Option<&'static str> {
    let (group, version, kind) = match kind_key.split('/').collect::<Vec<_>>()[..] {
        [group, version, kind] => (group, Some(version), kind),
        [group, kind] => (group, None, kind),
        _ => return None,
    };
    Builtins::get().strategic_root(group, version, kind)
}

/// Metadata of `field` inside a value of definition `ty` (`UNKNOWN` when not described).
pub(crate) fn field(ty: Option<&str>, field: &str) -> FieldMeta {
    // Undescribed fields behave like untagged Go fields: maps merge, lists are atomic.
    ty.and_then(|ty| table().get(&(ty, field)).copied()).unwrap_or(UNKNOWN)
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
