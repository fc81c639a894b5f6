//! Request bodies decoded from JSON or YAML into trees, with what kube-apiserver's decoders report:
//! duplicate fields (which `fieldValidation` turns into an error or a warning), and, for YAML, a cost
//! bounded by the text's size however its aliases expand (go-yaml refuses "excessive aliasing").
//!
//! Both go through one serde visitor that builds the `serde_json::Value` as `serde_json` would, counting
//! nodes and noticing a map key seen twice; the path of a duplicate is worked out only when there is one.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

/// What a YAML document may expand to, in units of a node or of [`STRING_UNIT`] bytes of string: at
/// least this many, and at least one per byte of its text. A document without aliases costs fewer
/// units than it has bytes, so this leaves room for reasonable anchors while a few kilobytes of nested
/// aliases (which expand exponentially), or many aliases of one long string, are refused before they
/// cost anything.
const YAML_UNITS_FLOOR: usize = 10_000;
/// Bytes of a string (or key) that cost one unit more than the node itself: an alias of a 1 MiB string
/// copies it, so each costs its size, not one node.
const STRING_UNIT: usize = 16;

/// Most duplicate (or unknown) fields reported of one body, as kube's strict decoder
/// (`sigs.k8s.io/json`) keeps them: a body of nothing but repeated keys must not become a list as long
/// as itself.
pub const MAX_FIELD_ERRORS: usize = 100;

/// The message go-yaml gives, which kube-apiserver passes on.
pub const EXCESSIVE_ALIASING: &str = "yaml: document contains excessive aliasing";

/// A decoded body.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    /// The tree.
    pub value: Value,
    /// Fields set twice in the same object, as kube prints their paths (`metadata.name`,
    /// `spec.containers[0].image`); the last value is the one kept.
    pub duplicates: Vec<String>,
}

/// Why a body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// Not JSON.
    #[error("{0}")]
    Json(String),
    /// Not YAML, or YAML that expands past its budget.
    #[error("{0}")]
    Yaml(String),
}

impl From<CodecError> for crate::status::ApiError {
    fn from(e: CodecError) -> Self {
        match e {
            CodecError::Json(m) => crate::status::ApiError::bad_request(format!("error decoding JSON: {m}")),
            CodecError::Yaml(m) => crate::status::ApiError::bad_request(format!("error decoding YAML: {m}")),
        }
    }
}

/// Decode YAML or JSON text: JSON (text opening with `{`) as JSON, for JSON's exact errors.
pub fn yaml_or_json(bytes: &[u8]) -> Result<Decoded, CodecError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') => json(bytes),
        _ => yaml(bytes),
    }
}

/// Decode JSON.
pub fn json(bytes: &[u8]) -> Result<Decoded, CodecError> {
    let run = |paths: bool| {
        let state = State::new(usize::MAX, paths);
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let value = Node(&state).deserialize(&mut de).and_then(|v| de.end().map(|_| v));
        value.map(|v| (v, state))
    };
    let (value, state) = run(false).map_err(|e| CodecError::Json(e.to_string()))?;
    finish(value, state, || run(true).ok().map(|(_, s)| s))
}

/// Decode YAML (JSON is YAML too), refusing a document that expands to more nodes than its size allows.
pub fn yaml(bytes: &[u8]) -> Result<Decoded, CodecError> {
    let budget = YAML_UNITS_FLOOR.max(bytes.len());
    let run = |paths: bool| {
        let state = State::new(budget, paths);
        let value = Node(&state).deserialize(serde_yaml_ng::Deserializer::from_slice(bytes));
        match value {
            Ok(v) => Ok((v, state)),
            // serde_yaml_ng's own guard (which counts alias lookups, not what they expand to) may
            // stop a document first.
            Err(e) if state.left.get() == 0 || e.to_string().starts_with("repetition limit exceeded") => {
                Err(EXCESSIVE_ALIASING.to_string())
            }
            Err(e) => Err(format!("yaml: {e}")),
        }
    };
    let (value, state) = run(false).map_err(CodecError::Yaml)?;
    finish(value, state, || run(true).ok().map(|(_, s)| s))
}

/// The decoded value and its duplicates, decoding again with paths kept when there are some (rare,
/// so the usual decode keeps no path).
fn finish(value: Value, state: State, with_paths: impl FnOnce() -> Option<State>) -> Result<Decoded, CodecError> {
    if !state.duplicated.get() {
        return Ok(Decoded { value, duplicates: Vec::new() });
    }
    let duplicates = with_paths().map(|s| s.found.into_inner()).unwrap_or_default();
    Ok(Decoded { value, duplicates })
}

/// What one decode keeps track of.
struct State {
    /// Units still allowed (see `YAML_UNITS_FLOOR`).
    left: Cell<usize>,
    /// Whether a key was seen twice in an object.
    duplicated: Cell<bool>,
    /// When keeping paths: where the visitor is, and the duplicates found.
    paths: Option<RefCell<Vec<Segment>>>,
    found: RefCell<Vec<String>>,
}

enum Segment {
    Field(String),
    Item(usize),
}

impl State {
    fn new(budget: usize, paths: bool) -> State {
        State {
            left: Cell::new(budget),
            duplicated: Cell::new(false),
            paths: paths.then(|| RefCell::new(Vec::new())),
            found: RefCell::new(Vec::new()),
        }
    }

    /// Spend one unit for a node.
    fn take<E: serde::de::Error>(&self) -> Result<(), E> {
        self.spend(1)
    }

    /// Spend a node's unit and those of the `len` bytes of its string.
    fn take_str<E: serde::de::Error>(&self, len: usize) -> Result<(), E> {
        self.spend(1 + len / STRING_UNIT)
    }

    fn spend<E: serde::de::Error>(&self, units: usize) -> Result<(), E> {
        match self.left.get().checked_sub(units) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.left.set(0);
                Err(E::custom(EXCESSIVE_ALIASING))
            }
        }
    }

    fn enter(&self, segment: Segment) {
        if let Some(p) = &self.paths {
            p.borrow_mut().push(segment);
        }
    }

    fn leave(&self) {
        if let Some(p) = &self.paths {
            p.borrow_mut().pop();
        }
    }

    /// A key seen twice at the current path: reported once, and at most `MAX_FIELD_ERRORS` in all.
    fn duplicate(&self, key: &str) {
        self.duplicated.set(true);
        let Some(p) = &self.paths else { return };
        if self.found.borrow().len() >= MAX_FIELD_ERRORS {
            return;
        }
        let mut path = String::new();
        for s in p.borrow().iter() {
            match s {
                Segment::Field(f) if path.is_empty() => path.push_str(f),
                Segment::Field(f) => {
                    path.push('.');
                    path.push_str(f);
                }
                Segment::Item(i) => path.push_str(&format!("[{i}]")),
            }
        }
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(key);
        let mut found = self.found.borrow_mut();
        if !found.contains(&path) {
            found.push(path);
        }
    }
}

/// Builds one node.
struct Node<'a>(&'a State);

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any valid JSON value")
    }

    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Value, E> {
        self.0.take()?;
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Value, E> {
        self.0.take()?;
        Ok(Value::from(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Value, E> {
        self.0.take()?;
        Ok(Value::from(v))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Value, E> {
        self.0.take()?;
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Value, E> {
        self.0.take_str(v.len())?;
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Value, E> {
        self.0.take_str(v.len())?;
        Ok(Value::String(v))
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Value, E> {
        self.0.take()?;
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.0.take()?;
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.0.take()?;
        let mut items = Vec::new();
        loop {
            self.0.enter(Segment::Item(items.len()));
            let next = seq.next_element_seed(Node(self.0));
            self.0.leave();
            match next? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.0.take()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.0.take_str(key.len())?;
            // The key's copy for the path only when paths are kept: the usual decode allocates nothing more.
            let tracking = self.0.paths.is_some();
            if tracking {
                self.0.enter(Segment::Field(key.clone()));
            }
            let value = map.next_value_seed(Node(self.0));
            if tracking {
                self.0.leave();
            }
            let value = value?;
            if out.contains_key(&key) {
                self.0.duplicate(&key);
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_decodes_as_serde_json_does() {
        let text = br#"{"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": {"d": []}}"#;
        let d = json(text).unwrap();
        assert_eq!(d.value, serde_json::from_slice::<Value>(text).unwrap());
        assert!(d.duplicates.is_empty());
        assert!(matches!(json(b"{\"a\": }"), Err(CodecError::Json(_))));
        assert!(json(b"{} trailing").is_err());
    }

    #[test]
    fn duplicates_are_found_with_their_paths_and_the_last_value_wins() {
        let d = json(br#"{"metadata": {"name": "a", "labels": {}, "name": "b"}, "spec": {"containers": [{"image": "x", "image": "y"}]}}"#).unwrap();
        assert_eq!(d.value["metadata"]["name"], "b");
        assert_eq!(d.value["spec"]["containers"][0]["image"], "y");
        assert_eq!(d.duplicates, ["metadata.name", "spec.containers[0].image"]);
        let many: String = (0..1000).map(|i| format!("\"k{}\":1,", i % 150)).collect();
        let d = json(format!("{{\"a\":{{\"b\":{{{many}\"z\":0}}}}}}").as_bytes()).unwrap();
        assert_eq!(d.duplicates.len(), MAX_FIELD_ERRORS, "each once, and no more than kube reports");
        assert_eq!((d.duplicates[0].as_str(), d.duplicates[99].as_str()), ("a.b.k0", "a.b.k99"));
        let top = json(br#"{"kind": "A", "kind": "B"}"#).unwrap();
        assert_eq!(top.duplicates, ["kind"]);
        let y = yaml(b"metadata:\n  name: a\n  name: b\n").unwrap();
        assert_eq!(
            (y.value["metadata"]["name"].as_str(), y.duplicates),
            (Some("b"), vec!["metadata.name".to_string()])
        );
    }

    #[test]
    fn yaml_decodes_with_anchors_within_reason() {
        let d = yaml(b"a: &x {b: 1, c: [1, 2]}\nd: *x\ne: 'str'\n").unwrap();
        assert_eq!(d.value, json!({"a": {"b": 1, "c": [1, 2]}, "d": {"b": 1, "c": [1, 2]}, "e": "str"}));
        assert!(matches!(yaml(b"a: [unclosed"), Err(CodecError::Yaml(_))));
    }

    /// Each level doubles the one before: 30 levels of a few bytes each would be a billion nodes.
    #[test]
    fn nested_aliases_are_refused_before_they_expand() {
        let mut text = String::from("l0: &l0 [x, x]\n");
        for i in 1..30 {
            text.push_str(&format!("l{i}: &l{i} [*l{p}, *l{p}]\n", p = i - 1));
        }
        let started = std::time::Instant::now();
        assert_eq!(yaml(text.as_bytes()), Err(CodecError::Yaml(EXCESSIVE_ALIASING.into())));
        assert!(started.elapsed() < std::time::Duration::from_secs(2), "{:?}", started.elapsed());
        // Many aliases of one long string: each would copy it.
        let long = format!("a: &a \"{}\"\nb: [{}]\n", "x".repeat(100_000), vec!["*a"; 2000].join(", "));
        assert_eq!(yaml(long.as_bytes()), Err(CodecError::Yaml(EXCESSIVE_ALIASING.into())));
        let keys = format!(
            "a: &a \"{}\"\nb: {{{}}}\n",
            "k".repeat(100_000),
            (0..200).map(|i| format!("? *a\n: {i}")).collect::<Vec<_>>().join(", ")
        );
        assert!(yaml(keys.as_bytes()).is_err());
        // A few aliases of a large anchor: few lookups, a quadratic expansion.
        let anchor = vec!["x"; 2000].join(", ");
        let flat = format!("a: &a [{anchor}]\nb: [{}]\n", vec!["*a"; 2000].join(", "));
        assert_eq!(yaml(flat.as_bytes()), Err(CodecError::Yaml(EXCESSIVE_ALIASING.into())));
        // The same shape, shallow enough to stay within the budget, decodes.
        let small: String = text.lines().take(10).map(|l| format!("{l}\n")).collect();
        assert!(yaml(small.as_bytes()).is_ok());
    }
}
