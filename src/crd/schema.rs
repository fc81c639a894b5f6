//! A custom object checked against its CRD version's structural schema, as kube-apiserver does:
//! defaults filled in, unknown fields found (to refuse, warn about or prune), and value errors
//! (type, required, enum, bounds, pattern) reported as the field causes of a 422.
//!
//! `apiVersion`, `kind` and `metadata` at the root are the server's business (checked with every other
//! object's metadata), so the walk starts below them.

use serde_json::{Map, Value};

use crate::status::{cause, Cause};

/// Compiled `pattern`s, shared by every cluster, since most install the same CRDs. Compiling a pattern
/// for each string it checked cost one compilation per value, which one write with a large array
/// multiplied on the shared cores. Read by every write of a custom resource, from any task; bounded in
/// bytes (each pattern weighs the most its program and search cache may take: `[a-z]{29000}` is 13
/// characters and a megabyte compiled), and evicting by S3-FIFO, so a tenant's many distinct patterns
/// cost it recompiles, never unbounded memory, and do not push out the patterns every other tenant's
/// writes use.
fn compiled(pattern: &str) -> Option<regex::Regex> {
    type Patterns = quick_cache::sync::Cache<String, (Option<regex::Regex>, u64), PatternBytes>;
    static PATTERNS: std::sync::OnceLock<Patterns> = std::sync::OnceLock::new();
    const CAPACITY: usize = 1024;
    const CAPACITY_BYTES: u64 = 64 << 20;
    let patterns = PATTERNS.get_or_init(|| Patterns::with_weighter(CAPACITY, CAPACITY_BYTES, PatternBytes));
    if let Some((re, _)) = patterns.get(pattern) {
        return re;
    }
    let (re, bytes) = match build_weighed(pattern) {
        Ok((re, bytes)) => (Some(re), bytes),
        Err(_) => (None, 0),
    };
    patterns.insert(pattern.to_string(), (re.clone(), bytes));
    re
}

/// Weighs a cached pattern by the bytes it may hold (and its text's).
#[derive(Clone)]
struct PatternBytes;

impl quick_cache::Weighter<String, (Option<regex::Regex>, u64)> for PatternBytes {
    fn weight(&self, pattern: &String, (_, bytes): &(Option<regex::Regex>, u64)) -> u64 {
        64 + pattern.len() as u64 + bytes
    }
}

/// The most a pattern's compiled program may take; most take a few kilobytes, and get the small bound.
const PROGRAM_BYTES: [usize; 2] = [64 << 10, 1 << 20];
/// The most a pattern's search cache may grow to.
const SEARCH_CACHE_BYTES: usize = 256 << 10;

/// A schema's `pattern` compiled, with a bound on the compiled program and its search cache, so one
/// hostile pattern cannot take seconds or megabytes; with the most bytes it may hold.
fn build_weighed(pattern: &str) -> Result<(regex::Regex, u64), regex::Error> {
    let with = |program: usize| {
        regex::RegexBuilder::new(pattern).size_limit(program).dfa_size_limit(SEARCH_CACHE_BYTES).build()
    };
    let program = match with(PROGRAM_BYTES[0]) {
        Err(regex::Error::CompiledTooBig(_)) => PROGRAM_BYTES[1],
        other => return other.map(|re| (re, (PROGRAM_BYTES[0] + SEARCH_CACHE_BYTES) as u64)),
    };
    with(program).map(|re| (re, (program + SEARCH_CACHE_BYTES) as u64))
}

/// Every `pattern` in a schema that does not compile, as (its path below `path`, the pattern, why), for
/// refusing the CRD as kube-apiserver does ("must be a valid regular expression").
pub fn bad_patterns(schema: &Value, path: &str, out: &mut Vec<(String, String, String)>) {
    let Some(s) = schema.as_object() else { return };
    if let Some(p) = s.get("pattern").and_then(Value::as_str) {
        // Through the cache: a CRD of a thousand large patterns written again compiles none of them.
        let failed = match compiled(p) {
            Some(_) => None,
            None => build_weighed(p).err(),
        };
        if let Some(e) = failed {
            // The regex crate's message spans lines (a caret under the error); one line reads better.
            let text = e.to_string();
            let last = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
            let why = last.strip_prefix("error: ").unwrap_or(last).to_string();
            out.push((format!("{path}.pattern"), p.to_string(), why));
        }
    }
    for (key, sub) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
        bad_patterns(sub, &format!("{path}.properties[{key}]"), out);
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(sub) = s.get(key) {
            bad_patterns(sub, &format!("{path}.{key}"), out);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for (i, sub) in s.get(key).and_then(Value::as_array).into_iter().flatten().enumerate() {
            bad_patterns(sub, &format!("{path}.{key}[{i}]"), out);
        }
    }
}

const ROOT_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

fn preserves_unknown(s: &Value) -> bool {
    s.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn embedded(s: &Value) -> bool {
    s.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true))
}

/// Where a walk of an object is, written out only for what it reports, as kube's `field.Path` is a list:
/// a map under a 1.5 MB key is walked without copying the key for each of its fields.
#[derive(Clone, Copy)]
struct At<'a> {
    up: Option<&'a At<'a>>,
    seg: Seg<'a>,
}

#[derive(Clone, Copy)]
enum Seg<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

impl<'a> At<'a> {
    const ROOT: At<'static> = At { up: None, seg: Seg::Root };

    fn key(&'a self, k: &'a str) -> At<'a> {
        At { up: Some(self), seg: Seg::Key(k) }
    }

    fn index(&'a self, i: usize) -> At<'a> {
        At { up: Some(self), seg: Seg::Index(i) }
    }

    /// `spec.list[0].x`, as `join` and kube write it.
    fn text(&self) -> String {
        let mut segs = Vec::new();
        let mut at = Some(self);
        while let Some(a) = at {
            segs.push(a.seg);
            at = a.up;
        }
        let mut out = String::new();
        for seg in segs.iter().rev() {
            match seg {
                Seg::Root => {}
                Seg::Key(k) if out.is_empty() => out.push_str(k),
                Seg::Key(k) => {
                    out.push('.');
                    out.push_str(k);
                }
                Seg::Index(i) => out.push_str(&format!("[{i}]")),
            }
        }
        out
    }
}

/// Most causes one object's value errors report, as kube caps the errors of one request.
const MAX_CAUSES: usize = 256;
/// Most bytes of causes' text one object's value errors report: a path may be as long as the object.
const MAX_CAUSE_BYTES: usize = 1 << 20;

/// The causes a walk found, until there are enough to say the object is invalid: the walk stops
/// there, so neither their number nor their text grows with what the object repeats.
#[derive(Default)]
struct Found {
    causes: Vec<Cause>,
    bytes: usize,
    /// Each scalar enum of the schema met so far, as a set (by its address in the schema, which the
    /// walk borrows throughout): an array of a million values checked against an enum of thousands
    /// costs a lookup each, not a scan.
    enums: std::collections::HashMap<usize, Option<std::collections::HashSet<String>>>,
}

/// A scalar's key in an enum's set: its JSON, a float zero's sign aside (`Value` holds -0.0 and 0.0
/// equal).
fn enum_key(v: &Value) -> String {
    match v {
        Value::Number(n) if n.is_f64() && n.as_f64() == Some(0.0) => "0.0".into(),
        _ => v.to_string(),
    }
}

impl Found {
    /// Whether `v` is one of `allowed`, as `Value` equality has it.
    fn allows(&mut self, allowed: &Vec<Value>, v: &Value) -> bool {
        let scalar = |v: &Value| !(v.is_object() || v.is_array());
        if allowed.len() < 16 || !scalar(v) {
            return allowed.contains(v);
        }
        // Whether the enum is all scalars is decided once too, with its set.
        let set = self
            .enums
            .entry(allowed as *const Vec<Value> as usize)
            .or_insert_with(|| allowed.iter().all(scalar).then(|| allowed.iter().map(enum_key).collect()));
        match set {
            Some(set) => set.contains(&enum_key(v)),
            None => allowed.contains(v),
        }
    }

    fn full(&self) -> bool {
        self.causes.len() >= MAX_CAUSES || self.bytes >= MAX_CAUSE_BYTES
    }

    /// A cause at `at`, its message made from the path written out.
    fn push(&mut self, reason: &str, at: &At, message: impl FnOnce(&str) -> String) {
        if self.full() {
            return;
        }
        let path = at.text();
        let message = message(&path);
        self.bytes += path.len() + message.len();
        self.causes.push(cause(reason, &path, message));
    }
}

/// Most bytes (as JSON, about) the defaults of a schema may add to one object: etcd's limit on what it
/// stores. kube fills defaults into defaults it has just filled in, so a 12 KB schema of defaults
/// nested four deep, each a list of a thousand, makes 10^12 values of a `{}`: refused before it is.
pub const MAX_DEFAULTED_BYTES: usize = 1536 * 1024;

/// Defaults that would make the object larger than [`MAX_DEFAULTED_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the defaults of the schema make the object larger than the {MAX_DEFAULTED_BYTES} bytes it may be stored as")]
pub struct DefaultsTooLarge;

/// Fill in `default`s of absent properties, depth first, where the parent object exists (into the
/// defaults just filled in as well, as kube does).
pub fn apply_defaults(schema: &Value, obj: &mut Value) -> Result<(), DefaultsTooLarge> {
    let mut left = MAX_DEFAULTED_BYTES;
    defaults_within(schema, obj, &mut left)
}

fn defaults_within(schema: &Value, obj: &mut Value, left: &mut usize) -> Result<(), DefaultsTooLarge> {
    match obj {
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (k, ps) in props {
                    if m.contains_key(k) {
                        continue;
                    }
                    if let Some(d) = ps.get("default") {
                        let size = crate::meta::json_size_within(d, *left).ok_or(DefaultsTooLarge)?;
                        *left = left.checked_sub(k.len() + size).ok_or(DefaultsTooLarge)?;
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, v) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        defaults_within(ps, v, left)?;
                    }
                }
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for v in m.values_mut() {
                    defaults_within(ap, v, left)?;
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for v in a {
                    defaults_within(items, v, left)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Dotted paths (`spec.extra`, `spec.list[0].x`) of fields the schema does not declare.
pub fn unknown_fields(schema: &Value, obj: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk_unknown(schema, obj, &At::ROOT, true, &mut out);
    out
}

/// Most unknown fields reported, as kube reports them (`MAX_FIELD_ERRORS`), and most bytes of their
/// paths.
fn unknown_full(out: &[String]) -> bool {
    out.len() >= crate::codec::MAX_FIELD_ERRORS || out.iter().map(String::len).sum::<usize>() >= MAX_CAUSE_BYTES
}

/// What an object schema says about its fields.
struct Fields<'a> {
    props: Option<&'a Map<String, Value>>,
    /// `additionalProperties` with a schema: a map whose values all follow it.
    values: Option<&'a Value>,
    /// `additionalProperties: true`: any field goes, unchecked.
    free: bool,
    /// At the root or in an embedded resource: `apiVersion`, `kind` and `metadata` are not the schema's.
    meta_is_ours: bool,
}

impl<'a> Fields<'a> {
    fn of(schema: &'a Value, root: bool) -> Self {
        Fields {
            props: schema.get("properties").and_then(Value::as_object),
            values: schema.get("additionalProperties").filter(|a| a.is_object()),
            free: schema.get("additionalProperties") == Some(&Value::Bool(true)),
            meta_is_ours: root || embedded(schema),
        }
    }

    /// Fields the walk leaves alone.
    fn skipped(&self, k: &str) -> bool {
        self.meta_is_ours && ROOT_FIELDS.contains(&k)
    }

    /// The schema of field `k`, if declared.
    fn child(&self, k: &str) -> Option<&'a Value> {
        self.props.and_then(|ps| ps.get(k)).or(self.values)
    }

    fn known(&self, k: &str) -> bool {
        self.free || self.skipped(k) || self.child(k).is_some()
    }
}

fn walk_unknown(schema: &Value, v: &Value, at: &At, root: bool, out: &mut Vec<String>) {
    if preserves_unknown(schema) || unknown_full(out) {
        return;
    }
    match v {
        Value::Object(m) => {
            let fields = Fields::of(schema, root);
            for (k, child) in m.iter().filter(|(k, _)| !fields.skipped(k)) {
                match fields.child(k) {
                    Some(cs) => walk_unknown(cs, child, &at.key(k), false, out),
                    None if fields.free => {}
                    None if unknown_full(out) => return,
                    None => out.push(at.key(k).text()),
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for (i, child) in a.iter().enumerate() {
                    walk_unknown(items, child, &at.index(i), false, out);
                }
            }
        }
        _ => {}
    }
}

/// Remove the fields `unknown_fields` reports (kube-apiserver prunes them unless asked to refuse).
pub fn prune(schema: &Value, obj: &mut Value) {
    prune_walk(schema, obj, true);
}

fn prune_walk(schema: &Value, v: &mut Value, root: bool) {
    if preserves_unknown(schema) {
        return;
    }
    match v {
        Value::Object(m) => {
            let fields = Fields::of(schema, root);
            m.retain(|k, _| fields.known(k));
            for (k, child) in m.iter_mut().filter(|(k, _)| !fields.skipped(k)) {
                if let Some(cs) = fields.child(k) {
                    prune_walk(cs, child, false);
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for child in a {
                    prune_walk(items, child, false);
                }
            }
        }
        _ => {}
    }
}

/// Go's JSON word for a value, as kube-openapi's validator quotes it.
fn type_word(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value as it appears in a validation message (strings quoted, like Go's `%#v`).
/// Most bytes of an enum listed in one error: every value refused names the list, so a long enum and
/// many values refused would make messages of their product.
const MAX_LISTED: usize = 4096;

/// An enum's values as an error lists them, as far as [`MAX_LISTED`] bytes, then `...`.
fn listed(allowed: &[Value]) -> String {
    let mut list = String::new();
    for (i, v) in allowed.iter().enumerate() {
        if list.len() > MAX_LISTED {
            list.push_str(", ...");
            break;
        }
        if i > 0 {
            list.push_str(", ");
        }
        list.push_str(&shown(v));
    }
    list
}

fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

fn type_ok(ty: &str, v: &Value) -> bool {
    match ty {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "integer" => v.is_i64() || v.is_u64() || v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "number" => v.is_number(),
        _ => true,
    }
}

/// Value errors of the whole object, as field causes.
pub fn value_errors(schema: &Value, obj: &Value) -> Vec<Cause> {
    let mut out = Found::default();
    if let (Some(props), Some(m)) = (schema.get("properties").and_then(Value::as_object), obj.as_object()) {
        check_object(schema, props, m, &At::ROOT, true, &mut out);
    }
    out.causes
}

fn check_object(
    schema: &Value,
    props: &Map<String, Value>,
    m: &Map<String, Value>,
    at: &At,
    root: bool,
    out: &mut Found,
) {
    for req in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if !m.contains_key(req) {
            out.push("FieldValueRequired", &at.key(req), |_| "Required value".into());
        }
    }
    for (k, child) in m {
        if root && ROOT_FIELDS.contains(&k.as_str()) {
            continue;
        }
        if let Some(cs) = props.get(k) {
            check(cs, child, &at.key(k), out);
        }
    }
}

fn check(schema: &Value, v: &Value, at: &At, out: &mut Found) {
    if out.full() {
        return;
    }
    if v.is_null() {
        if schema.get("nullable") != Some(&Value::Bool(true)) && schema.get("type").is_some() {
            out.push("FieldValueTypeInvalid", at, |path| {
                format!(
                    "Invalid value: \"null\": {path} in body must be of type {}: \"null\"",
                    schema["type"].as_str().unwrap_or("object")
                )
            });
        }
        return;
    }
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(v.is_string() || type_ok("integer", v)) {
            out.push("FieldValueTypeInvalid", at, |path| {
                format!(
                    "Invalid value: {}: {path} in body must be of type integer,string: {:?}",
                    shown(v),
                    type_word(v)
                )
            });
        }
        return;
    }
    if let Some(ty) = schema.get("type").and_then(Value::as_str) {
        if !type_ok(ty, v) {
            out.push("FieldValueTypeInvalid", at, |path| {
                format!("Invalid value: {:?}: {path} in body must be of type {ty}: {:?}", type_word(v), type_word(v))
            });
            return;
        }
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
        if !out.allows(allowed, v) {
            out.push("FieldValueNotSupported", at, |_| {
                format!("Unsupported value: {}: supported values: {}", shown(v), listed(allowed))
            });
        }
    }
    let bound = |key: &str| schema.get(key).and_then(Value::as_f64);
    let exclusive = |key: &str| schema.get(key) == Some(&Value::Bool(true));
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if let Some(min) = bound("minimum") {
                let (bad, word) = if exclusive("exclusiveMinimum") {
                    (x <= min, "greater than")
                } else {
                    (x < min, "greater than or equal to")
                };
                if bad {
                    out.push("FieldValueInvalid", at, |path| {
                        format!("Invalid value: {n}: {path} in body should be {word} {min}")
                    });
                }
            }
            if let Some(max) = bound("maximum") {
                let (bad, word) = if exclusive("exclusiveMaximum") {
                    (x >= max, "less than")
                } else {
                    (x > max, "less than or equal to")
                };
                if bad {
                    out.push("FieldValueInvalid", at, |path| {
                        format!("Invalid value: {n}: {path} in body should be {word} {max}")
                    });
                }
            }
        }
        Value::String(s) => {
            let len = s.chars().count() as f64;
            if bound("minLength").is_some_and(|m| len < m) {
                out.push("FieldValueInvalid", at, |path| {
                    format!(
                        "Invalid value: {s:?}: {path} in body should be at least {} chars long",
                        bound("minLength").unwrap_or(0.0)
                    )
                });
            }
            if bound("maxLength").is_some_and(|m| len > m) {
                out.push("FieldValueTooLong", at, |_| {
                    format!("Too long: may not be more than {} bytes", bound("maxLength").unwrap_or(0.0))
                });
            }
            if let Some(p) = schema.get("pattern").and_then(Value::as_str) {
                // RE2 (Go) and the regex crate share their syntax for what schemas use; a pattern
                // that does not compile was the CRD author's mistake and checks nothing.
                if compiled(p).is_some_and(|re| !re.is_match(s)) {
                    out.push("FieldValueInvalid", at, |path| {
                        format!("Invalid value: {s:?}: {path} in body should match '{p}'")
                    });
                }
            }
        }
        Value::Array(a) => {
            let n = a.len() as f64;
            if bound("minItems").is_some_and(|m| n < m) {
                out.push("FieldValueInvalid", at, |path| {
                    format!(
                        "Invalid value: {}: {path} in body should have at least {} items",
                        a.len(),
                        bound("minItems").unwrap_or(0.0)
                    )
                });
            }
            if bound("maxItems").is_some_and(|m| n > m) {
                out.push("FieldValueTooMany", at, |_| {
                    format!("Too many: {}: must have at most {} items", a.len(), bound("maxItems").unwrap_or(0.0))
                });
            }
            if let Some(items) = schema.get("items") {
                for (i, child) in a.iter().enumerate() {
                    check(items, child, &at.index(i), out);
                }
            }
        }
        Value::Object(m) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                check_object(schema, props, m, at, embedded(schema), out);
            } else if let Some(ap) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                for (k, child) in m {
                    check(ap, child, &at.key(k), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size"], "properties": {
                "size": {"type": "integer", "minimum": 1, "maximum": 10},
                "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 5},
                "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "empty": {"type": "object"}
            }},
            "status": {"type": "object", "properties": {"ready": {"type": "boolean"}}}
        }})
    }

    fn fields(obj: Value) -> Vec<String> {
        value_errors(&schema(), &obj).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    /// What one object's errors report is bounded in number and in text, however often the object
    /// repeats a bad value or however long its keys: the walk stops once it has enough to refuse.
    #[test]
    fn errors_stop_at_enough_to_refuse() {
        let allowed: Vec<String> = (0..1000).map(|i| format!("value-{i}")).collect();
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "x": {"type": "array", "items": {"type": "string", "enum": allowed}},
            "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {}}}}}}});
        let obj = json!({"spec": {"x": vec!["nope"; 100_000]}});
        let causes = value_errors(&schema, &obj);
        // Each lists the enum (4 KiB of it): the bytes run out a little before the count does.
        assert!(causes.len() > 200 && causes.len() <= MAX_CAUSES, "{}", causes.len());
        assert_eq!(causes[3].field, "spec.x[3]");
        let bytes: usize = causes.iter().map(|c| c.field.len() + c.message.len()).sum();
        assert!(bytes <= MAX_CAUSE_BYTES + 8192, "{bytes}");
        // Every value allowed: looked up, and no error.
        let obj = json!({"spec": {"x": vec!["value-999"; 100_000]}});
        assert!(value_errors(&schema, &obj).is_empty());
        // A float zero is allowed by either sign, as `Value` equality has it.
        let mut zeros: Vec<Value> = (1..20).map(|i| json!(i as f64 + 0.5)).collect();
        zeros.push(json!(0.0));
        let schema_of = |e: Vec<Value>| json!({"type": "object", "properties": {"n": {"type": "number", "enum": e}}});
        assert!(value_errors(&schema_of(zeros.clone()), &json!({"n": -0.0})).is_empty());
        assert_eq!(value_errors(&schema_of(zeros), &json!({"n": 0.25})).len(), 1);
        // A map under a 1 MB key, of a hundred thousand fields no schema declares.
        let fields: Map<String, Value> = (0..100_000).map(|i| (format!("f{i}"), json!(0))).collect();
        let key = "k".repeat(1 << 20);
        let obj = json!({"spec": {"m": {key.clone(): fields}}});
        let unknown = unknown_fields(&schema, &obj);
        assert!(!unknown.is_empty() && unknown.len() <= crate::codec::MAX_FIELD_ERRORS, "{}", unknown.len());
        assert_eq!(unknown[0], format!("spec.m.{key}.f0"));
    }

    #[test]
    fn a_valid_object_has_no_errors_and_gets_defaults() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 3, "port": "http", "labels": {"a": "b"}, "free": {"any": [1]}}});
        assert!(fields(obj.clone()).is_empty());
        apply_defaults(&schema(), &mut obj).unwrap();
        assert_eq!(obj["spec"]["color"], "red");
        assert!(obj.get("status").is_none(), "defaults only fill existing parents");
    }

    #[test]
    fn defaults_inside_defaults_stop_at_what_can_be_stored() {
        // Four levels, each defaulting to a thousand objects that default the next level: 10^12 values.
        let mut level = json!({"type": "object"});
        for name in ["d", "c", "b", "a"] {
            let list = vec![json!({}); 1000];
            level = json!({"type": "object", "properties": {name: {
                "type": "array", "default": list, "items": level,
            }}});
        }
        let schema = json!({"type": "object", "properties": {"spec": level}});
        let mut obj = json!({"spec": {}});
        assert_eq!(apply_defaults(&schema, &mut obj), Err(DefaultsTooLarge));
        // One level of a thousand is filled in, and the defaults inside it too.
        let one = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "a": {"type": "array", "default": vec![json!({}); 1000], "items": {"type": "object",
                "properties": {"b": {"type": "string", "default": "x"}}}},
        }}}});
        let mut obj = json!({"spec": {}});
        apply_defaults(&one, &mut obj).unwrap();
        assert_eq!(obj["spec"]["a"].as_array().unwrap().len(), 1000);
        assert_eq!(obj["spec"]["a"][999]["b"], "x", "defaults inside a default are filled in too");
    }

    #[test]
    fn a_pattern_weighs_what_its_program_may_take() {
        let (_, small) = build_weighed("^[a-z0-9-]+$").unwrap();
        let (_, large) = build_weighed("[a-z]{2900}").unwrap();
        assert_eq!(small, (PROGRAM_BYTES[0] + SEARCH_CACHE_BYTES) as u64);
        assert_eq!(large, (PROGRAM_BYTES[1] + SEARCH_CACHE_BYTES) as u64, "13 characters, a large program");
        assert!(matches!(build_weighed("[a-z]{290000}"), Err(regex::Error::CompiledTooBig(_))));
    }

    #[test]
    fn a_long_enum_is_listed_in_part() {
        let values: Vec<String> = (0..5000).map(|i| format!("value-{i}")).collect();
        let schema = json!({"type": "object", "properties": {"spec": {"type": "array",
            "items": {"type": "string", "enum": values}}}});
        let causes = value_errors(&schema, &json!({"spec": ["no", "no", "no"]}));
        assert_eq!(causes.len(), 3);
        let m = &causes[0].message;
        assert!(m.starts_with("Unsupported value: \"no\": supported values: \"value-0\", \"value-1\""), "{m}");
        assert!(m.ends_with(", ...") && m.len() < 4096 + 200, "{} bytes", m.len());
    }

    #[test]
    fn value_errors_name_the_field() {
        assert_eq!(fields(json!({"spec": {}})), ["spec.size: Required value"]);
        assert_eq!(
            fields(json!({"spec": {"size": "3"}})),
            ["spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 0}})),
            ["spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"]
        );
        assert_eq!(
            fields(json!({"spec": {"size": 1, "color": "green"}})),
            ["spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\""]
        );
        assert_eq!(fields(json!({"spec": {"size": 1, "name": "ABC"}})).len(), 1);
        assert_eq!(fields(json!({"spec": {"size": 1, "tags": ["a", "b", 3]}})).len(), 2);
        assert_eq!(fields(json!({"spec": {"size": 1, "port": true}})).len(), 1);
        assert_eq!(fields(json!({"spec": {"size": 1, "labels": {"a": 1}}})).len(), 1);
    }

    #[test]
    fn unknown_fields_are_found_and_pruned() {
        let mut obj = json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 1, "extra": 1, "free": {"kept": 1}, "empty": {"gone": 1}, "tags": ["a"]}, "top": 1});
        assert_eq!(unknown_fields(&schema(), &obj), ["spec.empty.gone", "spec.extra", "top"]);
        prune(&schema(), &mut obj);
        assert_eq!(
            obj,
            json!({"apiVersion": "x/v1", "kind": "W", "metadata": {"name": "a"},
            "spec": {"size": 1, "free": {"kept": 1}, "empty": {}, "tags": ["a"]}})
        );
    }
}
