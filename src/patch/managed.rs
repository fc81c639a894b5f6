//! Server-side apply and `metadata.managedFields` bookkeeping, after k8s.io/apimachinery's
//! `managedfields` and sigs.k8s.io/structured-merge-diff, for unstructured objects.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::fieldset::{changed_leaves, field_pe, key_pe, path_string, remove_members, value_pe, FieldSet, Pe};
use super::merge_keys::{self, FieldMeta, Ssa};
pub use super::ManagerConflict;
use super::PatchError;

/// Metadata fields that the field manager never records as owned.
const UNOWNED_METADATA: &[&str] =
    &["name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"];

/// One server-side apply request (a PATCH with `application/apply-patch+yaml`).
#[derive(Debug, Clone, Copy)]
pub struct ApplyRequest<'a> {
    /// The stored object, or `None` when the apply creates it.
    pub live: Option<&'a Value>,
    /// The applied configuration (the request body, decoded).
    pub applied: &'a Value,
    /// The `fieldManager` query parameter.
    pub manager: &'a str,
    /// The `force` query parameter: take conflicting fields instead of failing.
    pub force: bool,
    /// The API version the request was made in, recorded in the managedFields entry.
    pub api_version: &'a str,
    /// `group/Kind`, e.g. `apps/Deployment` or `/ConfigMap`.
    pub kind_key: &'a str,
    /// The current time, RFC 3339 with seconds.
    pub now: &'a str,
    /// The subresource addressed (`status`, `scale`), if any.
    pub subresource: Option<&'a str>,
}

/// Applies `req.applied` onto `req.live` and returns the new object, `metadata.managedFields`
/// included. Fails with [`PatchError::Conflict`] when other managers own fields being changed.
pub fn apply(req: ApplyRequest) -> Result<Value, PatchError> {
    if !req.applied.is_object() {
        return Err(PatchError::InvalidPatch(
            "error decoding YAML: the applied configuration must be an object".to_string(),
        ));
    }
    let root = root_meta(req.kind_key);
    let mut applied = without_nulls(req.applied);
    if let Some(Value::Object(meta)) = applied.get_mut("metadata") {
        meta.remove("managedFields");
    }
    let applied_stripped = strip(&applied);
    let mut applied_set = value_set(&applied_stripped, root, "", Style::Apply, "")?;
    applied_set.member = false;

    let mut entries =
        req.live.and_then(|l| l.pointer("/metadata/managedFields")).map(parse_entries).unwrap_or_default();
    let subresource = req.subresource.filter(|s| !s.is_empty());
    let mine = entries
        .iter()
        .position(|e| e.manager == req.manager && e.operation == "Apply" && e.subresource.as_deref() == subresource);
    let previous = mine.map(|i| entries[i].fields.clone()).unwrap_or_default();

    // A field conflicts when another manager owns it and the apply would change its value. The fields
    // the apply changes are found once, walking the applied and live objects together; each manager's
    // set is then walked against them, so an object with thousands of managers, or lists of thousands
    // of items, costs what they hold, not one's size times the other's.
    let changed = changed_leaves(&applied_set, Some(&applied_stripped), req.live);
    let mut conflicts: Vec<(usize, Vec<Pe>)> = Vec::new();
    for (i, entry) in entries.iter().enumerate() {
        if Some(i) != mine {
            conflicts.extend(entry.fields.common_members(&changed).into_iter().map(|path| (i, path)));
        }
    }
    if !conflicts.is_empty() {
        if !req.force {
            return Err(conflict_error(&entries, &conflicts));
        }
        for (i, path) in &conflicts {
            entries[*i].fields.remove(path);
        }
    }

    let mut merged = match req.live {
        Some(live) => merge(live, &applied, root),
        None => applied.clone(),
    };

    // Fields this manager applied before but no longer does are removed, unless still owned.
    let mut owned = applied_set.clone();
    for (i, entry) in entries.iter().enumerate() {
        if Some(i) != mine {
            owned.union_with(&entry.fields);
        }
    }
    let mut dropped = previous;
    dropped.subtract(&applied_set);
    // A field this manager dropped goes unless someone still owns something at or below it; a parent
    // that goes takes its children with it. All of them in one walk of the object.
    let mut gone = FieldSet::default();
    for path in dropped.members() {
        if !owned.has_member_at_or_below(&path) && !is_key_of_item(&path) {
            gone.insert(&path);
        }
    }
    remove_members(&mut merged, &gone);

    let entry = Entry {
        manager: req.manager.to_string(),
        operation: "Apply".to_string(),
        api_version: req.api_version.to_string(),
        time: Some(req.now.to_string()),
        subresource: subresource.map(str::to_string),
        fields: applied_set,
    };
    match mine {
        Some(i) => entries[i] = entry,
        None => entries.push(entry),
    }
    write_entries(&mut merged, entries);
    Ok(merged)
}

/// Whether `path` ends at a key field of an associative-list item, which must stay as long as
/// the item does (the item is removed through its own path otherwise).
fn is_key_of_item(path: &[Pe]) -> bool {
    let [.., parent, last] = path else {
        return false;
    };
    let (Some(json), Some(field)) = (parent.strip_prefix("k:"), last.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(json).is_ok_and(|keys| keys.contains_key(field))
}

/// Records a non-apply write (create, update, patch) by `manager`: its `Update` entry gains the
/// fields that changed between `old` and `new` (all fields on create) and other managers lose
/// them. Managed fields supplied in `new` that differ from `old`'s replace them first, as the
/// apiserver lets clients rewrite managedFields (kubectl's client-side-apply migration does).
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    now: &str,
    subresource: Option<&str>,
    kind_key: &str,
) {
    let root = root_meta(kind_key);
    let old_fields = old.and_then(|o| o.pointer("/metadata/managedFields"));
    let new_fields = new.pointer("/metadata/managedFields");
    let mut entries = match (new_fields, old_fields) {
        (Some(n), o) if Some(n) != o => parse_entries(n),
        (_, Some(o)) => parse_entries(o),
        _ => Vec::new(),
    };

    // The objects' top levels seen without what the manager ignores, not copied (objects may be large).
    let new_meta = owned_metadata(new);
    let new_top = Top::of(new, new_meta.as_ref());
    let (changed, removed) = match old {
        Some(old) => {
            let old_meta = owned_metadata(old);
            let old_top = Top::of(old, old_meta.as_ref());
            if old_top.is_empty() || new_top.is_empty() {
                diff(&strip(old), &strip(new), root, "")
            } else {
                diff_fields(&old_top, &new_top, root)
            }
        }
        None => {
            let mut set = if new_top.is_empty() {
                update_set(&strip(new), root, "")
            } else {
                fields_set(&new_top, root, "", Style::Update, "").unwrap_or_else(|_| FieldSet::leaf())
            };
            set.member = false;
            (set, FieldSet::default())
        }
    };
    drop(new_top);

    let subresource = subresource.filter(|s| !s.is_empty());
    let is_mine = |e: &Entry| {
        e.manager == manager
            && e.operation == "Update"
            && e.api_version == api_version
            && e.subresource.as_deref() == subresource
    };
    for entry in entries.iter_mut().filter(|e| !is_mine(e)) {
        entry.fields.subtract_recursive(&removed);
        entry.fields.subtract(&changed);
    }
    match entries.iter_mut().find(|e| is_mine(e)) {
        Some(entry) => {
            entry.fields.subtract_recursive(&removed);
            if !changed.is_empty() {
                entry.fields.union_with(&changed);
                entry.time = Some(now.to_string());
            }
        }
        None if !changed.is_empty() => entries.push(Entry {
            manager: manager.to_string(),
            operation: "Update".to_string(),
            api_version: api_version.to_string(),
            time: Some(now.to_string()),
            subresource: subresource.map(str::to_string),
            fields: changed,
        }),
        None => {}
    }
    write_entries(new, entries);
}

// === managedFields entries ===

/// A decoded `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: Option<String>,
    fields: FieldSet,
}

fn parse_entries(v: &Value) -> Vec<Entry> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    let text = |item: &Value, k: &str| item.get(k).and_then(Value::as_str).map(str::to_string);
    items
        .iter()
        .filter_map(|item| {
            Some(Entry {
                manager: text(item, "manager").unwrap_or_default(),
                operation: text(item, "operation")?,
                api_version: text(item, "apiVersion").unwrap_or_default(),
                time: text(item, "time"),
                subresource: text(item, "subresource").filter(|s| !s.is_empty()),
                fields: item.get("fieldsV1").map(FieldSet::from_fields_v1).unwrap_or_default(),
            })
        })
        .collect()
}

/// Writes the entries in the apiserver's order: Apply before Update, then by time, manager,
/// apiVersion and subresource; entries that own nothing are dropped.
fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let Value::Object(root) = obj else { return };
    let meta = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(meta) = meta else { return };
    if entries.is_empty() {
        meta.remove("managedFields");
        return;
    }
    let encoded = entries
        .into_iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("manager".into(), Value::String(e.manager));
            m.insert("operation".into(), Value::String(e.operation));
            m.insert("apiVersion".into(), Value::String(e.api_version));
            if let Some(t) = e.time {
                m.insert("time".into(), Value::String(t));
            }
            m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            m.insert("fieldsV1".into(), e.fields.to_fields_v1());
            if let Some(s) = e.subresource {
                m.insert("subresource".into(), Value::String(s));
            }
            Value::Object(m)
        })
        .collect();
    meta.insert("managedFields".into(), Value::Array(encoded));
}

/// How managedfields' `printManager` names a manager in conflict messages.
fn print_manager(e: &Entry) -> String {
    let mut s = format!("{:?}", e.manager);
    if let Some(sub) = &e.subresource {
        s.push_str(&format!(" with subresource {sub:?}"));
    }
    if e.operation == "Update" {
        s.push_str(&format!(" using {}", e.api_version));
    }
    s
}

fn conflict_error(entries: &[Entry], conflicts: &[(usize, Vec<Pe>)]) -> PatchError {
    let mut out: Vec<(String, ManagerConflict)> = conflicts
        .iter()
        .map(|(i, path)| {
            let e = &entries[*i];
            (
                e.manager.clone(),
                ManagerConflict {
                    manager: e.manager.clone(),
                    field: path_string(path),
                    message: format!("conflict with {}", print_manager(e)),
                },
            )
        })
        .collect();
    // Stable: keeps path order within one manager.
    out.sort_by(|a, b| (&a.0, &a.1.message).cmp(&(&b.0, &b.1.message)));
    PatchError::Conflict { conflicts: out.into_iter().map(|(_, c)| c).collect() }
}

// === field sets of values ===

fn root_meta(kind_key: &str) -> FieldMeta {
    FieldMeta { ty: merge_keys::root_type(kind_key), ..merge_keys::UNKNOWN }
}

/// Metadata for the items of a list whose field metadata is `meta`.
fn item_meta(meta: FieldMeta) -> FieldMeta {
    FieldMeta { ty: meta.ty, ..merge_keys::UNKNOWN }
}

/// A JSON object as the field manager walks it: its fields in key order, and lookups by name. Both a
/// map of the tree and an object's top level seen without copying it (`Top`) are one.
trait Fields<'v> {
    fn each(&self) -> impl Iterator<Item = (&'v str, &'v Value)> + '_;
    fn field(&self, k: &str) -> Option<&'v Value>;
    fn is_empty(&self) -> bool;
}

impl<'v> Fields<'v> for &'v Map<String, Value> {
    fn each(&self) -> impl Iterator<Item = (&'v str, &'v Value)> + '_ {
        self.iter().map(|(k, v)| (k.as_str(), v))
    }

    fn field(&self, k: &str) -> Option<&'v Value> {
        self.get(k)
    }

    fn is_empty(&self) -> bool {
        Map::is_empty(self)
    }
}

/// An object's top level as `strip` would leave it, by reference: its fields but apiVersion, kind and
/// metadata, and the metadata `owned_metadata` made (small, so copied).
struct Top<'v>(std::collections::BTreeMap<&'v str, &'v Value>);

impl<'v> Top<'v> {
    fn of(obj: &'v Value, metadata: Option<&'v Value>) -> Top<'v> {
        let mut fields: std::collections::BTreeMap<&str, &Value> = obj
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| !matches!(k.as_str(), "apiVersion" | "kind" | "metadata"))
            .map(|(k, v)| (k.as_str(), v))
            .collect();
        if let Some(m) = metadata {
            fields.insert("metadata", m);
        }
        Top(fields)
    }
}

impl<'v> Fields<'v> for Top<'v> {
    fn each(&self) -> impl Iterator<Item = (&'v str, &'v Value)> + '_ {
        self.0.iter().map(|(k, v)| (*k, *v))
    }

    fn field(&self, k: &str) -> Option<&'v Value> {
        self.0.get(k).copied()
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An object's metadata without what the field manager does not own; `None` when nothing is left.
fn owned_metadata(obj: &Value) -> Option<Value> {
    let meta = obj.get("metadata")?.as_object()?;
    let owned: Map<String, Value> = meta
        .iter()
        .filter(|(k, _)| !UNOWNED_METADATA.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!owned.is_empty()).then_some(Value::Object(owned))
}

/// The object without the parts the field manager ignores.
fn strip(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Value::Object(root) = &mut obj {
        root.remove("apiVersion");
        root.remove("kind");
        if let Some(Value::Object(meta)) = root.get_mut("metadata") {
            meta.retain(|k, _| !UNOWNED_METADATA.contains(&k.as_str()));
            if meta.is_empty() {
                root.remove("metadata");
            }
        }
    }
    obj
}

/// Drops `null` map values, which an applied configuration uses to mean "not set".
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), without_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Style {
    /// The set an applied configuration owns: list items are members, maps are not.
    Apply,
    /// The set an update adds: newly created free-form maps and lists are members as well.
    Update,
}

/// The fields set in `v`, the value of field `name` described by `meta`.
fn value_set(v: &Value, meta: FieldMeta, name: &str, style: Style, path: &str) -> Result<FieldSet, PatchError> {
    if meta.ssa == Ssa::Atomic {
        return Ok(FieldSet::leaf());
    }
    match v {
        // structured-merge-diff records nothing for an empty map in an applied configuration.
        Value::Object(m) if m.is_empty() && style == Style::Apply => Ok(FieldSet::default()),
        Value::Object(m) if !m.is_empty() => fields_set(&m, meta, name, style, path),
        Value::Array(items) => match meta.ssa {
            Ssa::Set => {
                let mut set = FieldSet { member: style == Style::Update, ..FieldSet::default() };
                for item in items {
                    set.children.insert(value_pe(item), FieldSet::leaf());
                }
                Ok(set)
            }
            Ssa::Map(keys) => {
                let mut set =
                    FieldSet { member: style == Style::Update && name != "containers", ..FieldSet::default() };
                for (i, item) in items.iter().enumerate() {
                    let Some(pe) = key_pe(item, keys).filter(|_| item.is_object()) else {
                        return Err(missing_key(path, i, keys));
                    };
                    let mut item_set = value_set(item, item_meta(meta), "", style, path)?;
                    item_set.member = true;
                    set.children.insert(pe, item_set);
                }
                Ok(set)
            }
            _ => Ok(FieldSet::leaf()),
        },
        _ => Ok(FieldSet::leaf()),
    }
}

/// The fields set in a non-empty object (see `value_set`).
fn fields_set<'v>(
    m: &impl Fields<'v>,
    meta: FieldMeta,
    name: &str,
    style: Style,
    path: &str,
) -> Result<FieldSet, PatchError> {
    let mut set =
        FieldSet { member: style == Style::Update && merge_keys::is_free_form_map(name), ..FieldSet::default() };
    for (k, child) in m.each() {
        let child_meta = merge_keys::field(meta.ty, k);
        let child_set = value_set(child, child_meta, k, style, &format!("{path}.{k}"))?;
        set.children.insert(field_pe(k), child_set);
    }
    Ok(set)
}

fn missing_key(path: &str, index: usize, keys: &[&str]) -> PatchError {
    let quoted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
    PatchError::InvalidPatch(format!(
        "{path}: element {index}: associative list with keys has an element that omits key field {}",
        quoted.join(" or ")
    ))
}

/// The set an update records for a newly written value; a list whose items lack their keys is
/// owned as a whole, since updates cannot be refused here.
fn update_set(v: &Value, meta: FieldMeta, name: &str) -> FieldSet {
    value_set(v, meta, name, Style::Update, "").unwrap_or_else(|_| FieldSet::leaf())
}

/// The fields added or changed (first) and removed (second) from `old` to `new`.
fn diff(old: &Value, new: &Value, meta: FieldMeta, name: &str) -> (FieldSet, FieldSet) {
    let mut changed = FieldSet::default();
    let mut removed = FieldSet::default();
    match (old, new) {
        _ if meta.ssa == Ssa::Atomic => {
            if old != new {
                changed.member = true;
            }
        }
        (Value::Object(o), Value::Object(n)) if !o.is_empty() && !n.is_empty() => return diff_fields(&o, &n, meta),
        (Value::Array(o), Value::Array(n)) if matches!(meta.ssa, Ssa::Set | Ssa::Map(_)) => {
            let pes = |list: &[Value]| -> Option<Vec<Pe>> {
                list.iter()
                    .map(|item| match meta.ssa {
                        Ssa::Map(keys) if item.is_object() => key_pe(item, keys),
                        Ssa::Set => Some(value_pe(item)),
                        _ => None,
                    })
                    .collect()
            };
            match (pes(o), pes(n)) {
                (Some(opes), Some(npes)) => {
                    let old_items: HashMap<&Pe, &Value> = opes.iter().zip(o.iter()).collect();
                    for (pe, nv) in npes.iter().zip(n.iter()) {
                        let c = match old_items.get(pe) {
                            Some(ov) if meta.ssa != Ssa::Set => {
                                let (c, r) = diff(ov, nv, item_meta(meta), "");
                                removed.children.insert(pe.clone(), r);
                                c
                            }
                            Some(_) => FieldSet::default(),
                            None => added(nv, item_meta(meta), ""),
                        };
                        changed.children.insert(pe.clone(), c);
                    }
                    let new_pes: HashSet<&Pe> = npes.iter().collect();
                    for (pe, ov) in opes.iter().zip(o.iter()) {
                        if !new_pes.contains(pe) {
                            removed.children.insert(pe.clone(), added(ov, item_meta(meta), ""));
                        }
                    }
                }
                _ if old != new => changed.member = true,
                _ => {}
            }
        }
        (Value::Object(o), Value::Object(n)) if o.is_empty() && !n.is_empty() => {
            changed = added(new, meta, name);
        }
        _ => {
            if old != new {
                changed.member = true;
                if old.is_object() || old.is_array() {
                    removed = update_set(old, meta, name);
                    removed.member = false;
                }
            }
        }
    }
    changed.children.retain(|_, c| !c.is_empty());
    removed.children.retain(|_, c| !c.is_empty());
    (changed, removed)
}

/// `diff` of two non-empty objects.
fn diff_fields<'v>(o: &impl Fields<'v>, n: &impl Fields<'v>, meta: FieldMeta) -> (FieldSet, FieldSet) {
    let mut changed = FieldSet::default();
    let mut removed = FieldSet::default();
    for (k, nv) in n.each() {
        let child_meta = merge_keys::field(meta.ty, k);
        let (c, r) = match o.field(k) {
            Some(ov) => diff(ov, nv, child_meta, k),
            None => (added(nv, child_meta, k), FieldSet::default()),
        };
        changed.children.insert(field_pe(k), c);
        removed.children.insert(field_pe(k), r);
    }
    for (k, ov) in o.each() {
        if n.field(k).is_none() {
            let child_meta = merge_keys::field(meta.ty, k);
            removed.children.insert(field_pe(k), added(ov, child_meta, k));
        }
    }
    changed.children.retain(|_, c| !c.is_empty());
    removed.children.retain(|_, c| !c.is_empty());
    (changed, removed)
}

/// The set an update records for a value it adds: everything in it, the value itself included.
fn added(v: &Value, meta: FieldMeta, name: &str) -> FieldSet {
    let mut set = update_set(v, meta, name);
    set.member = true;
    set
}

// === merging an applied configuration ===

/// Merges `applied` into `live`: maps field by field, associative lists and sets by key,
/// everything else replaced.
fn merge(live: &Value, applied: &Value, meta: FieldMeta) -> Value {
    if meta.ssa == Ssa::Atomic {
        return applied.clone();
    }
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            // Only what the applied object leaves alone is copied from the live one: copying it all at
            // every level and then replacing made a merge cost the object's size times its depth.
            let mut out: Map<String, Value> =
                l.iter().filter(|(k, _)| !a.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
            for (k, av) in a {
                let child_meta = merge_keys::field(meta.ty, k);
                let merged = match l.get(k) {
                    Some(lv) => merge(lv, av, child_meta),
                    None => av.clone(),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => {
            let pe = |item: &Value| -> Option<Pe> {
                match meta.ssa {
                    Ssa::Map(keys) if item.is_object() => key_pe(item, keys),
                    Ssa::Set => Some(value_pe(item)),
                    _ => None,
                }
            };
            let lpes: Option<Vec<Pe>> = l.iter().map(pe).collect();
            let apes: Option<Vec<Pe>> = a.iter().map(pe).collect();
            match (lpes, apes) {
                (Some(lpes), Some(apes)) => Value::Array(interleave(l, &lpes, a, &apes, item_meta(meta))),
                _ => applied.clone(),
            }
        }
        _ => applied.clone(),
    }
}

/// structured-merge-diff's list merge: live-only items keep their place, shared items follow
/// the applied order, applied-only items go where the applied list puts them.
fn interleave(l: &[Value], lpes: &[Pe], r: &[Value], rpes: &[Pe], meta: FieldMeta) -> Vec<Value> {
    let lindex: HashMap<&Pe, usize> = lpes.iter().enumerate().rev().map(|(i, p)| (p, i)).collect();
    let rset: HashSet<&Pe> = rpes.iter().collect();
    let mut shared = rpes.iter().filter(|p| lindex.contains_key(p));
    let mut next_shared = shared.next();
    let mut merged_r: HashSet<&Pe> = HashSet::new();
    let mut out = Vec::with_capacity(l.len() + r.len());
    let merge_item = |pe: &Pe, rv: &Value| match lindex.get(pe) {
        Some(&li) => merge(&l[li], rv, meta),
        None => rv.clone(),
    };
    let (mut li, mut ri) = (0, 0);
    while li < l.len() || ri < r.len() {
        if li < l.len() && ri < r.len() {
            let pe = &lpes[li];
            if *pe == rpes[ri] {
                merged_r.insert(pe);
                out.push(merge(&l[li], &r[ri], meta));
                if next_shared == Some(pe) {
                    next_shared = shared.next();
                }
                li += 1;
                ri += 1;
                continue;
            }
            if rset.contains(pe) && next_shared.is_some_and(|s| s != pe) {
                li += 1;
                continue;
            }
        }
        if li < l.len() {
            let pe = &lpes[li];
            if !rset.contains(pe) {
                out.push(l[li].clone());
                li += 1;
                continue;
            }
            if merged_r.contains(pe) {
                li += 1;
                continue;
            }
        }
        if ri < r.len() {
            let pe = &rpes[ri];
            merged_r.insert(pe);
            out.push(merge_item(pe, &r[ri]));
            if next_shared == Some(pe) {
                next_shared = shared.next();
            }
            ri += 1;
        }
    }
    out
}
