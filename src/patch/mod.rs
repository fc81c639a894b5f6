//! PATCH semantics for unstructured objects: JSON patch (RFC 6902), JSON merge patch (RFC 7386),
//! strategic merge patch for built-in kinds, and server-side apply with `managedFields`.

use serde_json::Value;

mod fieldset;
pub mod managed;
mod merge_keys;
mod strategic;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_managed;

/// The media types that may be used for a PATCH to a custom resource (no strategic merge patch).
const CUSTOM_RESOURCE_PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

/// The kind of patch a request body holds, chosen by its `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386).
    Merge,
    /// `application/strategic-merge-patch+json` (built-in kinds only).
    StrategicMerge,
    /// `application/apply-patch+yaml` (server-side apply; the body may be YAML or JSON).
    Apply,
}

impl PatchType {
    /// Maps a `Content-Type` header value to a patch type, ignoring parameters such as `charset`.
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        let essence = ct.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        match essence.as_str() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::StrategicMerge),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }

    /// The media type string of this patch type.
    pub fn content_type(self) -> &'static str {
        match self {
            PatchType::Json => "application/json-patch+json",
            PatchType::Merge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// One field that a server-side apply would take from another manager.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagerConflict {
    /// The other manager's name (`managedFields[].manager`).
    pub manager: String,
    /// The field path as kube-apiserver prints it, e.g. `.data.x` or `.spec.containers[name="a"].image`.
    pub field: String,
    /// The `details.causes[].message`, e.g. `conflict with "m" using v1`.
    pub message: String,
}

/// Why a patch could not be applied. Messages read like kube-apiserver's.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    /// The body is malformed or an operation cannot be applied (HTTP 400 or 422).
    #[error("{0}")]
    InvalidPatch(String),
    /// A JSON patch `test` operation did not match (HTTP 422).
    #[error("{0}")]
    TestFailed(String),
    /// Server-side apply found fields owned by other managers with other values (HTTP 409).
    #[error("{}", conflict_message(.conflicts))]
    Conflict {
        /// Every conflicting field, grouped by manager, in path order.
        conflicts: Vec<ManagerConflict>,
    },
    /// The patch is larger than the server takes (HTTP 413).
    #[error("{0}")]
    TooLarge(String),
    /// The patch cannot be applied within the server's bounds (HTTP 422, without the detail, as
    /// kube-apiserver words it).
    #[error("the server rejected our request due to an error in our request")]
    Rejected,
    /// Strategic merge patch on a kind without Go struct tags, i.e. a custom resource (HTTP 415).
    #[error(
        "the body of the request was in an unknown format - accepted media types include: {CUSTOM_RESOURCE_PATCH_TYPES}"
    )]
    UnsupportedMediaType,
}

/// Builds the message of managedfields' `NewConflictError`.
fn conflict_message(conflicts: &[ManagerConflict]) -> String {
    if let [one] = conflicts {
        return format!("Apply failed with 1 conflict: {}: {}", one.message, one.field);
    }
    // Grouped by manager, managers in sorted order, as the Go code prints them.
    let mut managers: Vec<&str> = conflicts.iter().map(|c| c.message.as_str()).collect();
    managers.sort_unstable();
    managers.dedup();
    let mut lines = Vec::new();
    for message in managers {
        let printed = message.strip_prefix("conflict with ").unwrap_or(message);
        lines.push(format!("conflicts with {printed}:"));
        lines.extend(conflicts.iter().filter(|c| c.message == message).map(|c| format!("- {}", c.field)));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// Operations a JSON patch may hold (kube-apiserver's `maxJSONPatchOperations`).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;
/// Bytes a JSON patch's `copy` operations may add in all (kube-apiserver's `JSONPatchMaxCopyBytes`):
/// without it, a kilobyte of operations copying an array into itself doubles it each time.
pub const MAX_JSON_PATCH_COPY_BYTES: usize = 3 * 1024 * 1024;

/// Array elements a JSON patch's operations may shift in all. An insert or removal inside an array
/// moves every element after it, so without a bound a 60 KB patch of 2,000 `remove /a/0` on a stored
/// array of 780,000 numbers moves 25 MB per operation, seconds of a shared worker's time. kube has
/// no such bound; ten million shifts are some tens of milliseconds, and a patch that edits an array
/// the way clients do (a few operations) comes nowhere near.
pub const MAX_JSON_PATCH_SHIFTS: usize = 10_000_000;

/// Elements after `path`'s place in its array, which an insert (`inserting`) or a removal there
/// shifts; 0 where its parent is not an array.
fn shifts(doc: &Value, path: &str, inserting: bool) -> usize {
    let Some((parent, last)) = path.rsplit_once('/') else { return 0 };
    let Some(Value::Array(items)) = doc.pointer(parent) else { return 0 };
    let at = if last == "-" { items.len() } else { last.parse::<usize>().unwrap_or(items.len()) };
    if inserting {
        items.len().saturating_sub(at)
    } else {
        items.len().saturating_sub(at + 1)
    }
}

/// Applies an RFC 6902 JSON patch (`patch` must be an array of operations), with kube-apiserver's
/// bounds: at most [`MAX_JSON_PATCH_OPERATIONS`] operations, and copies of at most
/// [`MAX_JSON_PATCH_COPY_BYTES`] in all, checked before each copy is made; and kgate's, at most
/// [`MAX_JSON_PATCH_SHIFTS`] array elements shifted.
pub fn json_patch(target: &Value, patch: Value) -> Result<Value, PatchError> {
    if let Some(n) = patch.as_array().map(Vec::len).filter(|n| *n > MAX_JSON_PATCH_OPERATIONS) {
        return Err(PatchError::TooLarge(format!(
            "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {n}"
        )));
    }
    let ops: json_patch::Patch =
        serde_json::from_value(patch).map_err(|e| PatchError::InvalidPatch(format!("error decoding patch: {e}")))?;
    let mut doc = target.clone();
    let (mut copied, mut shifted) = (0, 0usize);
    // At least as deep as the document is: a move within it is checked against this, not by walking
    // what it moves (moves are not bounded in bytes, and a thousand of a large subtree would walk it a
    // thousand times).
    let mut deepest = crate::meta::nesting(&doc, usize::MAX);
    for (i, op) in ops.0.iter().enumerate() {
        // Each op nests what it writes as deep as its path, so a copy of a value into itself doubles
        // its depth: seventeen of them make a value deeper than any stack can clone or drop. Refused
        // before it is made, at the depth a stored object may have.
        use json_patch::PatchOperation::*;
        let levels = |path: &str| path.matches('/').count();
        let nests = |v: Option<&Value>| v.map_or(0, |v| crate::meta::nesting(v, crate::meta::MAX_NESTING));
        let depth = match op {
            Add(a) => levels(a.path.as_str()) + nests(Some(&a.value)),
            Replace(r) => levels(r.path.as_str()) + nests(Some(&r.value)),
            // Copies are bounded in bytes (below), and so is walking them.
            Copy(c) => levels(c.path.as_str()) + nests(doc.pointer(c.from.as_str())),
            // What is moved nests at most as deep as the document below where it was; only when that
            // bound is too deep is the value walked, and the walk spends the copies' budget.
            Move(m) => match levels(m.path.as_str()) + deepest.saturating_sub(levels(m.from.as_str())) {
                bound if bound <= crate::meta::MAX_NESTING => bound,
                _ => {
                    let moved = doc.pointer(m.from.as_str());
                    match moved
                        .map_or(Some(0), |v| crate::meta::json_size_within(v, MAX_JSON_PATCH_COPY_BYTES - copied))
                    {
                        Some(n) => copied += n,
                        None => return Err(PatchError::Rejected),
                    }
                    levels(m.path.as_str()) + nests(moved)
                }
            },
            Remove(_) | Test(_) => 0,
        };
        shifted += match op {
            Add(a) => shifts(&doc, a.path.as_str(), true),
            Remove(r) => shifts(&doc, r.path.as_str(), false),
            Move(m) => shifts(&doc, m.from.as_str(), false) + shifts(&doc, m.path.as_str(), true),
            Copy(c) => shifts(&doc, c.path.as_str(), true),
            Replace(_) | Test(_) => 0,
        };
        if shifted > MAX_JSON_PATCH_SHIFTS {
            return Err(PatchError::TooLarge(format!(
                "Request entity too large: operation {i} of the JSON patch would shift more than {MAX_JSON_PATCH_SHIFTS} array elements in all"
            )));
        }
        deepest = deepest.max(depth);
        if depth > crate::meta::MAX_NESTING {
            return Err(PatchError::InvalidPatch(format!(
                "the server rejected our request due to an error in our request: operation {i} would nest the object more than {} levels deep",
                crate::meta::MAX_NESTING
            )));
        }
        if let json_patch::PatchOperation::Copy(c) = op {
            let size = doc
                .pointer(c.from.as_str())
                .map_or(Some(0), |v| crate::meta::json_size_within(v, MAX_JSON_PATCH_COPY_BYTES - copied));
            match size {
                Some(n) => copied += n,
                // As kube-apiserver, whose copy limit error is not passed on.
                None => return Err(PatchError::Rejected),
            }
        }
        // One at a time, on our own copy of the object: nothing to undo when one fails.
        json_patch::patch_unsafe(&mut doc, std::slice::from_ref(op)).map_err(|mut e| {
            e.operation = i;
            match e.kind {
                json_patch::PatchErrorKind::TestFailed => {
                    PatchError::TestFailed(format!("testing value {} failed: test failed", e.path))
                }
                _ => PatchError::InvalidPatch(format!(
                    "the server rejected our request due to an error in our request: {e}"
                )),
            }
        })?;
    }
    Ok(doc)
}

/// Applies an RFC 7386 JSON merge patch (`patch` must be an object).
pub fn merge_patch(target: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(not_an_object(patch));
    }
    let mut doc = target.clone();
    json_patch::merge(&mut doc, patch);
    Ok(doc)
}

/// Applies a strategic merge patch, using the Go struct tags of the built-in kind.
///
/// `kind_key` is "group/Kind" e.g. "apps/Deployment", "/ConfigMap" for core.
/// `patch` is taken, not copied: its items move into the result (lists of thousands of them are what
/// makes a patch large).
pub fn strategic_merge_patch(target: &Value, patch: Value, kind_key: &str) -> Result<Value, PatchError> {
    let ty = merge_keys::root_type(kind_key).ok_or(PatchError::UnsupportedMediaType)?;
    let Value::Object(patch) = patch else {
        return Err(not_an_object(&patch));
    };
    let original = match target {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    strategic::merge_map(original, patch, Some(ty)).map(Value::Object)
}

/// The error Go's decoder gives when a patch body is not a JSON object.
fn not_an_object(patch: &Value) -> PatchError {
    let found = match patch {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    };
    PatchError::InvalidPatch(format!("json: cannot unmarshal {found} into Go value of type map[string]interface {{}}"))
}
