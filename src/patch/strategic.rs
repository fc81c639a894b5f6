//! Strategic merge patch for built-in kinds, following k8s.io/apimachinery's `strategicpatch`
//! with the server's options (parallel directive lists merged, unmatched nulls ignored).

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::merge_keys::{self, Smp};
use super::PatchError;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const SET_ORDER_PREFIX: &str = "$setElementOrder/";
const DELETE_PRIMITIVE_PREFIX: &str = "$deleteFromPrimitiveList/";

/// Applies `patch` to `original` where both are JSON objects of Go type `ty`.
pub(crate) fn merge_map(
    mut original: Map<String, Value>,
    mut patch: Map<String, Value>,
    ty: Option<&'static str>,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.remove(DIRECTIVE) {
        match directive.as_str() {
            Some("replace") => return merge_map(Map::new(), patch, ty),
            Some("delete") => return Ok(Map::new()),
            // Not accepted by the Go code in maps, but harmless: merge as usual.
            Some("merge") => {}
            _ => {
                return Err(PatchError::InvalidPatch(format!(
                    "unknown patch type: {} in map: {}",
                    go_value(&directive),
                    go_map(&patch)
                )));
            }
        }
    }

    apply_retain_keys(&mut original, &mut patch)?;
    apply_set_element_order(&mut original, &mut patch, ty)?;

    let mut deletions = Vec::new();
    for (key, patch_value) in patch {
        if let Some(field) = key.strip_prefix(DELETE_PRIMITIVE_PREFIX) {
            deletions.push((field.to_string(), patch_value));
            continue;
        }
        if key.starts_with(SET_ORDER_PREFIX) {
            continue;
        }
        if patch_value.is_null() {
            original.remove(&key);
            continue;
        }
        let meta = merge_keys::field(ty, &key);
        let merged = match (original.remove(&key), patch_value) {
            (Some(Value::Object(o)), Value::Object(p)) => Value::Object(merge_map(o, p, meta.ty)?),
            (Some(Value::Array(o)), Value::Array(p)) => Value::Array(merge_list(o, p, &key, meta.smp, meta.ty)?),
            // A new value, or one whose type changed: take the patch, still honouring (and
            // stripping) any directives inside it.
            (_, Value::Object(p)) => Value::Object(merge_map(Map::new(), p, meta.ty)?),
            (_, Value::Array(p)) => Value::Array(merge_list(Vec::new(), p, &key, meta.smp, meta.ty)?),
            (_, p) => p,
        };
        original.insert(key, merged);
    }

    for (field, values) in deletions {
        let Value::Array(values) = values else {
            return Err(PatchError::InvalidPatch(format!(
                "invalid type for {DELETE_PRIMITIVE_PREFIX}{field}: expected a list"
            )));
        };
        if let Some(Value::Array(list)) = original.get_mut(&field) {
            let gone = Index::of(&values, None);
            list.retain(|v| gone.get(v, None).is_none());
        }
    }
    Ok(original)
}

/// `$retainKeys`: drop every live key not listed, after checking the patch only sets listed keys.
fn apply_retain_keys(original: &mut Map<String, Value>, patch: &mut Map<String, Value>) -> Result<(), PatchError> {
    let Some(retain) = patch.remove(RETAIN_KEYS) else {
        return Ok(());
    };
    let Value::Array(retain) = retain else {
        return Err(PatchError::InvalidPatch(format!("invalid type for {RETAIN_KEYS}: expected a list of strings")));
    };
    let keep: std::collections::HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    let unlisted = patch.iter().any(|(k, v)| {
        !v.is_null()
            && !k.starts_with(SET_ORDER_PREFIX)
            && !k.starts_with(DELETE_PRIMITIVE_PREFIX)
            && !keep.contains(&k.as_str())
    });
    if unlisted {
        return Err(PatchError::InvalidPatch(
            "doesn't satisfy the requirement for retainKeys: every non-null field in the patch must be in the $retainKeys list"
                .to_string(),
        ));
    }
    original.retain(|k, _| keep.contains(&k.as_str()));
    Ok(())
}

/// `$setElementOrder/<field>`: merge the named list (if patched) and then order it as told.
fn apply_set_element_order(
    original: &mut Map<String, Value>,
    patch: &mut Map<String, Value>,
    ty: Option<&'static str>,
) -> Result<(), PatchError> {
    let keys: Vec<String> = patch.keys().filter(|k| k.starts_with(SET_ORDER_PREFIX)).cloned().collect();
    for directive_key in keys {
        let field = directive_key[SET_ORDER_PREFIX.len()..].to_string();
        let Some(Value::Array(order)) = patch.get(&directive_key).cloned() else {
            return Err(PatchError::InvalidPatch(format!("invalid type for {directive_key}: expected a list")));
        };
        let meta = merge_keys::field(ty, &field);
        let merge_key = match meta.smp {
            Smp::MergeKey(k) => Some(k),
            _ => None,
        };
        let patch_list = match patch.remove(&field) {
            Some(Value::Array(p)) => Some(p),
            Some(other) => {
                // Not a list: leave it for the main loop, which replaces the value.
                patch.insert(field.clone(), other);
                continue;
            }
            None => None,
        };
        if let Some(p) = &patch_list {
            validate_against_order(p, &order, merge_key)?;
        }
        let original_list = match original.get(&field) {
            Some(Value::Array(o)) => Some(o.clone()),
            _ => None,
        };
        let merged = match (original_list.clone(), patch_list) {
            (None, None) => continue,
            (Some(o), None) => o,
            (o, Some(p)) => merge_list(o.unwrap_or_default(), p, &field, meta.smp, meta.ty)?,
        };
        let server_order = original_list.unwrap_or_default();
        let named = Index::of(&order, merge_key);
        let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
            merged.into_iter().partition(|item| named.get(item, merge_key).is_some());
        original.insert(field, Value::Array(normalize_order(in_patch, server_only, &order, &server_order, merge_key)));
    }
    Ok(())
}

/// Every item in a patched list must be named, in the same relative order, by `$setElementOrder`.
fn validate_against_order(patch: &[Value], order: &[Value], merge_key: Option<&str>) -> Result<(), PatchError> {
    let mut last = None;
    let order = Index::of(order, merge_key);
    for item in patch {
        if item.get(DIRECTIVE).is_some() {
            continue;
        }
        match order.get(item, merge_key) {
            Some(i) if last.is_none_or(|l| i > l) => last = Some(i),
            Some(_) => {
                return Err(PatchError::InvalidPatch(
                    "error: the order of the items in the patch list doesn't match the $setElementOrder list"
                        .to_string(),
                ));
            }
            None => {
                return Err(PatchError::InvalidPatch(format!(
                    "error: the item {} in the patch list is not present in the $setElementOrder list",
                    go_value(item)
                )));
            }
        }
    }
    Ok(())
}

/// Merges two lists according to the field's patch strategy.
fn merge_list(
    original: Vec<Value>,
    patch: Vec<Value>,
    field: &str,
    smp: Smp,
    ty: Option<&'static str>,
) -> Result<Vec<Value>, PatchError> {
    match smp {
        Smp::Replace => Ok(patch),
        Smp::MergePrimitive => {
            // A `{"$patch":"replace"}` marker turns the merge into a replacement.
            if patch.iter().any(|v| v.get(DIRECTIVE).and_then(Value::as_str) == Some("replace")) {
                return Ok(patch.into_iter().filter(|v| !v.is_object()).collect());
            }
            if let Some(bad) = patch.iter().chain(original.iter()).find(|v| v.is_object() || v.is_array()) {
                return Err(PatchError::InvalidPatch(format!(
                    "cannot merge lists of non-primitive values for {field}: {}",
                    go_value(bad)
                )));
            }
            let mut merged = original.clone();
            let mut present = Index::of(&merged, None);
            for v in &patch {
                if present.get(v, None).is_none() {
                    present.add(v, None, merged.len());
                    merged.push(v.clone());
                }
            }
            let patched = Index::of(&patch, None);
            let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
                merged.into_iter().partition(|v| patched.get(v, None).is_some());
            Ok(normalize_order(in_patch, server_only, &patch, &original, None))
        }
        Smp::MergeKey(key) => merge_keyed_list(original, patch, key, ty),
    }
}

/// Merges lists of objects by `key`, honouring `$patch` items.
fn merge_keyed_list(
    mut original: Vec<Value>,
    patch: Vec<Value>,
    key: &str,
    ty: Option<&'static str>,
) -> Result<Vec<Value>, PatchError> {
    let mut plain = Vec::with_capacity(patch.len());
    let mut replace = false;
    let mut deleted = Vec::new();
    for item in patch {
        let Value::Object(map) = item else {
            return Err(PatchError::InvalidPatch(format!(
                "cannot merge a list item that is not a map: {}",
                go_value(&item)
            )));
        };
        match map.get(DIRECTIVE).map(|d| d.as_str()) {
            None => plain.push(map),
            Some(Some("delete")) => {
                if map.get(key).is_none() {
                    return Err(no_merge_key(&map, key));
                }
                deleted.push(Value::Object(map));
            }
            Some(Some("replace")) => replace = true,
            Some(Some("merge")) => {
                return Err(PatchError::InvalidPatch("merging lists cannot yet be specified in the patch".to_string()));
            }
            Some(_) => {
                let directive = map.get(DIRECTIVE).cloned().unwrap_or(Value::Null);
                return Err(PatchError::InvalidPatch(format!(
                    "unknown patch type: {} in map: {}",
                    go_value(&directive),
                    go_map(&map)
                )));
            }
        }
    }
    if !deleted.is_empty() {
        let gone = Index::of(&deleted, Some(key));
        original.retain(|o| gone.get(o, Some(key)).is_none());
    }
    if replace {
        return plain.into_iter().map(|m| merge_map(Map::new(), m, ty).map(Value::Object)).collect();
    }

    let server_order = original.clone();
    let mut merged = original;
    let mut live = Index::of(&merged, Some(key));
    let mut patch_keys = Vec::with_capacity(plain.len());
    for item in plain {
        let Some(value) = item.get(key).cloned() else {
            return Err(no_merge_key(&item, key));
        };
        let named = Value::Object(Map::from_iter([(key.to_string(), value)]));
        match live.get(&named, Some(key)) {
            Some(i) => {
                let current = match std::mem::take(&mut merged[i]) {
                    Value::Object(m) => m,
                    _ => Map::new(),
                };
                merged[i] = Value::Object(merge_map(current, item, ty)?);
            }
            None => {
                live.add(&named, Some(key), merged.len());
                merged.push(Value::Object(merge_map(Map::new(), item, ty)?));
            }
        }
        patch_keys.push(named);
    }
    let patched = Index::of(&patch_keys, Some(key));
    let (in_patch, server_only): (Vec<Value>, Vec<Value>) =
        merged.into_iter().partition(|v| patched.get(v, Some(key)).is_some());
    Ok(normalize_order(in_patch, server_only, &patch_keys, &server_order, Some(key)))
}

/// Orders patched items as in `patch_order` and server-only items as in `server_order`, then
/// interleaves them the way the Go code does (`normalizeElementOrder` + `mergeSortedSlice`).
fn normalize_order(
    mut in_patch: Vec<Value>,
    mut server_only: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let (patch_at, server_at) = (Index::of(patch_order, key), Index::of(server_order, key));
    in_patch.sort_by_cached_key(|v| patch_at.get(v, key).unwrap_or(usize::MAX));
    server_only.sort_by_cached_key(|v| server_at.get(v, key).unwrap_or(usize::MAX));

    let mut out = Vec::with_capacity(in_patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = in_patch.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            // A server-only item goes first only if the live list had it before the patch item.
            (Some(l), Some(r)) => matches!(
                (server_at.get(l, key), server_at.get(r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        out.extend(next);
    }
    out
}

/// The first position of each item in a list, by its merge-key value for maps (`key`) or by its whole
/// value otherwise: a lookup in constant time where a scan of the list made merging a list of n items
/// cost n² (20,000 containers in one patch took half a minute).
struct Index(HashMap<String, usize>);

impl Index {
    fn of(list: &[Value], key: Option<&str>) -> Index {
        let mut index = Index(HashMap::with_capacity(list.len()));
        for (i, v) in list.iter().enumerate() {
            index.add(v, key, i);
        }
        index
    }

    /// Record `item` at `at`, unless an equal one is recorded already (the first one wins, as a scan).
    fn add(&mut self, item: &Value, key: Option<&str>, at: usize) {
        if let Some(id) = identity(item, key) {
            self.0.entry(id).or_insert(at);
        }
    }

    /// Where an item equal to `item` is.
    fn get(&self, item: &Value, key: Option<&str>) -> Option<usize> {
        self.0.get(&identity(item, key)?).copied()
    }
}

/// What two items are compared by: the merge key's value, or the whole item; `None` for a map without
/// the merge key (it matches nothing).
fn identity(item: &Value, key: Option<&str>) -> Option<String> {
    match key {
        Some(k) => item.get(k).map(Value::to_string),
        None => Some(item.to_string()),
    }
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> PatchError {
    PatchError::InvalidPatch(format!("map: {} does not contain declared merge key: {key}", go_map(map)))
}

/// Renders a map roughly as Go's `%v` does, since the apiserver's messages embed that form.
fn go_map(map: &Map<String, Value>) -> String {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let inner: Vec<String> = entries.iter().map(|(k, v)| format!("{k}:{}", go_value(v))).collect();
    format!("map[{}]", inner.join(" "))
}

fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::String(s) => s.clone(),
        Value::Object(m) => go_map(m),
        Value::Array(a) => format!("[{}]", a.iter().map(go_value).collect::<Vec<_>>().join(" ")),
        other => other.to_string(),
    }
}
