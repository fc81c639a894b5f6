//! Schema walks over request bodies: unknown fields (strict decoding), pruning, and JSON type
//! mismatches worded like Go's `encoding/json`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::schema::ref_target;

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

/// Follows `$ref`/`allOf` to the schema that describes the value, returning it and the name of
/// the last definition crossed.
fn resolve<'a>(schemas: &'a BTreeMap<String, Value>, mut s: &'a Value) -> (&'a Value, Option<&'a str>) {
    let mut def = None;
    // Bounded so that a malformed self-reference cannot loop forever.
    for _ in 0..16 {
        let Some(name) = ref_target(s) else { break };
        let Some((key, target)) = schemas.get_key_value(name) else {
            break;
        };
        def = Some(key.as_str());
        s = target;
    }
    (s, def)
}

fn preserves_unknown(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

/// Schema of the values of a map-typed object, if it is one.
fn map_values(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|v| v.is_object())
}

/// Paths of the first `limit` fields in `obj` that `root` does not declare, or fewer when their keys
/// add up to a megabyte: the walk stops there, as each path holds its every key (one may be megabytes
/// long).
pub(super) fn unknown_paths(
    schemas: &BTreeMap<String, Value>,
    root: &Value,
    obj: &Value,
    limit: usize,
) -> Vec<Vec<Seg>> {
    let mut out = Vec::new();
    walk_unknown(schemas, root, obj, &mut Vec::new(), &mut out, (limit, &mut MAX_ERROR_BYTES.clone()));
    out
}

fn walk_unknown(
    schemas: &BTreeMap<String, Value>,
    schema: &Value,
    v: &Value,
    path: &mut Vec<Seg>,
    out: &mut Vec<Vec<Seg>>,
    (limit, bytes_left): (usize, &mut usize),
) {
    let (s, _) = resolve(schemas, schema);
    if preserves_unknown(s) || out.len() >= limit || *bytes_left == 0 {
        return;
    }
    match v {
        Value::Object(m) => {
            let Some(child_schema) = declared(s) else { return };
            for (k, child) in m {
                let child_schema = child_schema(k);
                path.push(Seg::Key(k.clone()));
                match child_schema {
                    Some(cs) => walk_unknown(schemas, cs, child, path, out, (limit, &mut *bytes_left)),
                    None if out.len() < limit && *bytes_left > 0 => {
                        let bytes: usize = path.iter().map(|seg| if let Seg::Key(k) = seg { k.len() } else { 8 }).sum();
                        *bytes_left = bytes_left.saturating_sub(bytes);
                        out.push(path.clone());
                    }
                    None => {}
                }
                path.pop();
            }
        }
        Value::Array(a) => {
            let Some(items) = s.get("items") else { return };
            for (i, child) in a.iter().enumerate() {
                path.push(Seg::Index(i));
                walk_unknown(schemas, items, child, path, out, (limit, &mut *bytes_left));
                path.pop();
            }
        }
        _ => {}
    }
}

/// `spec.template.spec.containers[0].imagee`, as the strict decoder prints it.
pub(super) fn format_path(path: &[Seg]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// The schema of each field an object schema declares (by name, or as a map's values); `None` for a
/// free-form object (RawExtension, FieldsV1, JSON), which takes any field. What the unknown-field walk
/// and the prune agree on.
fn declared<'a>(s: &'a Value) -> Option<impl Fn(&str) -> Option<&'a Value>> {
    let props = s.get("properties").and_then(Value::as_object);
    let values = map_values(s);
    let child = move |k: &str| -> Option<&'a Value> { props.and_then(|p| p.get(k)).or(values) };
    (props.is_some() || values.is_some()).then_some(child)
}

/// Removes every field [`unknown_paths`] would report, in one walk that writes out no path: a map under
/// a long key may hold a hundred thousand of them.
pub(super) fn prune_unknown(schemas: &BTreeMap<String, Value>, schema: &Value, v: &mut Value) {
    let (s, _) = resolve(schemas, schema);
    if preserves_unknown(s) {
        return;
    }
    match v {
        Value::Object(m) => {
            let Some(child_schema) = declared(s) else { return };
            m.retain(|k, _| child_schema(k).is_some());
            for (k, child) in m.iter_mut() {
                if let Some(cs) = child_schema(k) {
                    prune_unknown(schemas, cs, child);
                }
            }
        }
        Value::Array(a) => {
            let Some(items) = s.get("items") else { return };
            for child in a {
                prune_unknown(schemas, items, child);
            }
        }
        _ => {}
    }
}

/// JSON type mismatches in `obj` against the definition `def`.
pub(super) fn type_errors(schemas: &BTreeMap<String, Value>, def: &str, obj: &Value) -> Vec<String> {
    decode_errors(schemas, def, obj, None)
}

/// The quantities in `obj` that kube's decoder would refuse: each as written, with ParseQuantity's words.
pub(super) fn quantity_errors(
    schemas: &BTreeMap<String, Value>,
    def: &str,
    obj: &Value,
) -> Vec<(String, &'static str)> {
    let mut quantities = Vec::new();
    decode_errors(schemas, def, obj, Some(&mut quantities));
    quantities
}

/// Most bytes of errors one object's walk collects.
const MAX_ERROR_BYTES: usize = 1 << 20;

/// Type mismatches, and with `quantities` the quantities that do not parse (collected there).
fn decode_errors(
    schemas: &BTreeMap<String, Value>,
    def: &str,
    obj: &Value,
    mut quantities: Option<&mut Vec<(String, &'static str)>>,
) -> Vec<String> {
    let Some(root) = schemas.get(def) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let name = short_name(def);
    if !obj.is_object() && !obj.is_null() {
        out.push(format!("json: cannot unmarshal {} into Go value of type {}", json_type(obj), go_struct_name(def)));
        return out;
    }
    walk_types(schemas, root, obj, name, &mut Vec::new(), &mut out, &mut quantities);
    out
}

/// `io.k8s.api.apps.v1.DeploymentSpec` → `DeploymentSpec`.
fn short_name(def: &str) -> &str {
    def.rsplit('.').next().unwrap_or(def)
}

/// `io.k8s.api.core.v1.Container` → `v1.Container`, as Go's reflect prints the type.
fn go_struct_name(def: &str) -> String {
    let mut it = def.rsplit('.');
    match (it.next(), it.next()) {
        (Some(name), Some(pkg)) => format!("{pkg}.{name}"),
        _ => def.to_string(),
    }
}

/// Go's `encoding/json` word for a JSON value's type.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The Go type a schema decodes into, for error messages.
fn go_type(schemas: &BTreeMap<String, Value>, schema: &Value) -> String {
    let (s, def) = resolve(schemas, schema);
    if let Some(def) = def {
        return go_struct_name(def);
    }
    match s.get("type").and_then(Value::as_str) {
        Some("string") if s.get("format").and_then(Value::as_str) == Some("byte") => "[]uint8".into(),
        Some("string") => "string".into(),
        Some("integer") => match s.get("format").and_then(Value::as_str) {
            Some("int32") => "int32".into(),
            _ => "int64".into(),
        },
        Some("number") => "float64".into(),
        Some("boolean") => "bool".into(),
        Some("array") => match s.get("items") {
            Some(items) => format!("[]{}", go_type(schemas, items)),
            None => "[]interface {}".into(),
        },
        _ => match map_values(s) {
            Some(values) => format!("map[string]{}", go_type(schemas, values)),
            None => "map[string]interface {}".into(),
        },
    }
}

/// Types the schema accepts, or `None` when anything goes.
fn accepted(s: &Value) -> Option<Vec<&str>> {
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        return Some(vec![t]);
    }
    if let Some(one_of) = s.get("oneOf").and_then(Value::as_array) {
        let types: Vec<&str> = one_of.iter().filter_map(|o| o.get("type").and_then(Value::as_str)).collect();
        return (!types.is_empty()).then_some(types);
    }
    if s.get("properties").is_some() {
        return Some(vec!["object"]);
    }
    None
}

/// Why `v` does not fit the accepted types, as the "cannot unmarshal X" operand.
fn mismatch(v: &Value, types: &[&str], int32: bool) -> Option<String> {
    let ok = types.iter().any(|t| match (*t, v) {
        ("string", Value::String(_)) => true,
        ("boolean", Value::Bool(_)) => true,
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => {
            if let Some(i) = n.as_i64() {
                !int32 || i32::try_from(i).is_ok()
            } else {
                n.is_u64() && !int32
            }
        }
        ("object", Value::Object(_)) => true,
        ("array", Value::Array(_)) => true,
        _ => false,
    });
    if ok {
        return None;
    }
    Some(match v {
        // Go names the offending number when it is a number that does not fit an integer.
        Value::Number(n) if types.contains(&"integer") => format!("number {n}"),
        _ => json_type(v).to_string(),
    })
}

/// The definition of kube's `resource.Quantity`.
const QUANTITY: &str = "io.k8s.apimachinery.pkg.api.resource.Quantity";

/// Whether `text` is a quantity as kube's `ParseQuantity` reads one when it decodes a body: a signed
/// decimal, then a suffix (an SI or binary multiplier, or `e` and an exponent), with its words.
fn quantity_format(text: &str) -> Result<(), &'static str> {
    const FORMAT: &str = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
    const SUFFIX: &str = "unable to parse quantity's suffix";
    if text.is_empty() {
        return Err(FORMAT);
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut rest = &unsigned[digits(unsigned)..];
    if let Some(fraction) = rest.strip_prefix('.') {
        rest = &fraction[digits(fraction)..];
    }
    // The suffix: multiplier letters, then an optional signed exponent; anything after is no quantity.
    let letters = rest.find(|c: char| !"eEinumkKMGTP".contains(c)).unwrap_or(rest.len());
    let exponent = rest[letters..].strip_prefix(['+', '-']).unwrap_or(&rest[letters..]);
    if digits(exponent) != exponent.len() {
        return Err(FORMAT);
    }
    const MULTIPLIERS: &[&str] = &["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    let known = MULTIPLIERS.contains(&rest)
        || (rest.len() > 1 && rest.starts_with(['e', 'E']) && rest[1..].parse::<i64>().is_ok());
    if known {
        Ok(())
    } else {
        Err(SUFFIX)
    }
}

fn walk_types(
    schemas: &BTreeMap<String, Value>,
    schema: &Value,
    v: &Value,
    struct_name: &str,
    path: &mut Vec<String>,
    out: &mut Vec<String>,
    quantities: &mut Option<&mut Vec<(String, &'static str)>>,
) {
    // Enough type errors to refuse the object: the walk stops there, as each names its path (and one
    // key on it may be megabytes long). Quantities are all collected (a write compares them with the
    // stored object's): they sit in maps of quantities, whose paths hold no key but their own.
    if out.len() >= crate::codec::MAX_FIELD_ERRORS || out.iter().map(String::len).sum::<usize>() >= MAX_ERROR_BYTES {
        return;
    }
    // JSON null decodes to the zero value of any Go type.
    if v.is_null() {
        return;
    }
    let (s, def) = resolve(schemas, schema);
    if let Some(types) = accepted(s) {
        let int32 = s.get("format").and_then(Value::as_str) == Some("int32");
        if let Some(what) = mismatch(v, &types, int32) {
            let field =
                if path.is_empty() { struct_name.to_string() } else { format!("{struct_name}.{}", path.join(".")) };
            out.push(format!(
                "json: cannot unmarshal {what} into Go struct field {field} of type {}",
                go_type(schemas, schema)
            ));
            return;
        }
    }
    if def == Some(QUANTITY) {
        if let Some(found) = quantities.as_deref_mut() {
            let text = match v {
                Value::String(t) => t.trim().to_string(),
                other => other.to_string(),
            };
            if let Err(why) = quantity_format(&text) {
                found.push((text, why));
            }
        }
        return;
    }
    if let (Value::String(text), Some("byte")) = (v, s.get("format").and_then(Value::as_str)) {
        if let Some(at) = bad_base64_at(text) {
            out.push(format!("illegal base64 data at input byte {at} (field {struct_name}.{})", path.join(".")));
        }
        return;
    }
    // Go reports the innermost struct type, and paths do not restart inside it.
    let is_struct = s.get("properties").is_some();
    let inner_name = match def {
        Some(d) if is_struct => short_name(d),
        _ => struct_name,
    };
    match v {
        Value::Object(m) => {
            let props = s.get("properties").and_then(Value::as_object);
            let values = map_values(s);
            for (k, child) in m {
                if let Some(ps) = props.and_then(|p| p.get(k)) {
                    path.push(k.clone());
                    walk_types(schemas, ps, child, inner_name, path, out, quantities);
                    path.pop();
                } else if let Some(vs) = values {
                    // Map keys are not part of Go's field path.
                    walk_types(schemas, vs, child, inner_name, path, out, quantities);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = s.get("items") {
                for child in a {
                    walk_types(schemas, items, child, inner_name, path, out, quantities);
                }
            }
        }
        _ => {}
    }
}

/// Offset of the first byte standard padded base64 (Go's `base64.StdEncoding`) rejects;
/// the offsets are close to, not always equal to, Go's.
fn bad_base64_at(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let data_end = b.iter().position(|&c| c == b'=').unwrap_or(b.len());
    let alphabet = |c: &u8| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/';
    if let Some(i) = b[..data_end].iter().position(|c| !alphabet(c)) {
        return Some(i);
    }
    if let Some(i) = b[data_end..].iter().position(|&c| c != b'=') {
        return Some(data_end + i);
    }
    if !b.len().is_multiple_of(4) || b.len() - data_end > 2 {
        return Some(b.len() - b.len() % 4);
    }
    None
}
