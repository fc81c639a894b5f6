//! Field sets as stored in `managedFields[].fieldsV1`: a trie of encoded path elements
//! (`f:name`, `k:{"name":"a"}`, `v:"x"`, `i:0`), with `.` marking the node itself as a member.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One encoded path element, exactly as it appears as a `fieldsV1` key.
pub(crate) type Pe = String;

/// A set of field paths. Each node says whether its own path is a member and holds its children.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct FieldSet {
    /// The path leading to this node is itself in the set.
    pub member: bool,
    /// Sub-paths, by encoded path element.
    pub children: BTreeMap<Pe, FieldSet>,
}

// === impl FieldSet ===

impl FieldSet {
    /// A set holding only the node's own path.
    pub fn leaf() -> FieldSet {
        FieldSet { member: true, children: BTreeMap::new() }
    }

    /// No members at all.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Decodes a `fieldsV1` object; unknown shapes decode to what can be understood.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        let Value::Object(map) = v else { return set };
        if map.is_empty() {
            set.member = true;
        }
        for (k, child) in map {
            if k == "." {
                set.member = true;
            } else {
                set.children.insert(k.clone(), FieldSet::from_fields_v1(child));
            }
        }
        set
    }

    /// Encodes the children of this (root) node as a `fieldsV1` object.
    pub fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        for (k, child) in &self.children {
            if !child.is_empty() {
                map.insert(k.clone(), child.encode_node());
            }
        }
        Value::Object(map)
    }

    fn encode_node(&self) -> Value {
        let mut map = Map::new();
        let live_children: Vec<_> = self.children.iter().filter(|(_, c)| !c.is_empty()).collect();
        if self.member && !live_children.is_empty() {
            map.insert(".".to_string(), Value::Object(Map::new()));
        }
        for (k, child) in live_children {
            map.insert(k.clone(), child.encode_node());
        }
        Value::Object(map)
    }

    /// Adds every member of `other`.
    pub fn union_with(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (k, c) in &other.children {
            self.children.entry(k.clone()).or_default().union_with(c);
        }
    }

    /// Removes the members of `other` (exact paths only, descendants stay).
    pub fn subtract(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        for (k, c) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.subtract(c);
            }
        }
        self.prune();
    }

    /// Removes the members of `other` together with everything below them.
    pub fn subtract_recursive(&mut self, other: &FieldSet) {
        if other.member {
            *self = FieldSet::default();
            return;
        }
        for (k, c) in &other.children {
            if let Some(mine) = self.children.get_mut(k) {
                mine.subtract_recursive(c);
            }
        }
        self.prune();
    }

    fn prune(&mut self) {
        self.children.retain(|_, c| !c.is_empty());
    }

    /// Every member path, parents before their descendants.
    pub fn members(&self) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<Pe>, out: &mut Vec<Vec<Pe>>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (k, c) in &self.children {
            prefix.push(k.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    /// The node at `path`, if any.
    pub fn node(&self, path: &[Pe]) -> Option<&FieldSet> {
        let mut node = self;
        for pe in path {
            node = node.children.get(pe)?;
        }
        Some(node)
    }

    /// Whether `path` is a member.
    pub fn contains(&self, path: &[Pe]) -> bool {
        self.node(path).is_some_and(|n| n.member)
    }

    /// Removes `path` from the members.
    pub fn remove(&mut self, path: &[Pe]) {
        let mut single = FieldSet::default();
        single.insert(path);
        self.subtract(&single);
    }

    /// Adds `path` as a member.
    pub fn insert(&mut self, path: &[Pe]) {
        let mut node = self;
        for pe in path {
            node = node.children.entry(pe.clone()).or_default();
        }
        node.member = true;
    }

    /// Whether `path` or anything below it is a member.
    pub fn has_member_at_or_below(&self, path: &[Pe]) -> bool {
        self.node(path).is_some_and(|n| !n.is_empty())
    }
}

// === path elements ===

/// `f:<name>`.
pub(crate) fn field_pe(name: &str) -> Pe {
    format!("f:{name}")
}

/// `v:<json>`.
pub(crate) fn value_pe(v: &Value) -> Pe {
    format!("v:{v}")
}

/// `k:{...}` for a list item identified by `keys`, or `None` when a key field is missing.
/// Fields are written sorted by name, as structured-merge-diff sorts them.
pub(crate) fn key_pe(item: &Value, keys: &[&str]) -> Option<Pe> {
    let mut fields: Vec<(&str, Value)> = Vec::with_capacity(keys.len());
    for k in keys {
        let v = match item.get(*k) {
            Some(v) if !v.is_null() => v.clone(),
            // The server defaults `protocol`; without defaulting, `TCP` is what it would be.
            _ if *k == "protocol" => Value::String("TCP".to_string()),
            _ => return None,
        };
        fields.push((k, v));
    }
    fields.sort_by(|a, b| a.0.cmp(b.0));
    let inner: Vec<String> = fields.iter().map(|(k, v)| format!("{}:{v}", Value::String((*k).to_string()))).collect();
    Some(format!("k:{{{}}}", inner.join(",")))
}

/// Renders a path as structured-merge-diff's `Path.String()`: `.spec.containers[name="a"].image`.
pub(crate) fn path_string(path: &[Pe]) -> String {
    let mut out = String::new();
    for pe in path {
        if let Some(name) = pe.strip_prefix("f:") {
            out.push('.');
            out.push_str(name);
        } else if let Some(json) = pe.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Map<String, Value>>(json) {
                Ok(map) => {
                    let mut entries: Vec<_> = map.into_iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(&b.0));
                    entries.into_iter().map(|(k, v)| format!("{k}={v}")).collect()
                }
                Err(_) => vec![json.to_string()],
            };
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(json) = pe.strip_prefix("v:") {
            out.push_str(&format!("[={json}]"));
        } else if let Some(i) = pe.strip_prefix("i:") {
            out.push_str(&format!("[{i}]"));
        } else {
            out.push_str(pe);
        }
    }
    out
}

/// Finds the list item addressed by a `k:`, `v:` or `i:` element.
fn item_index(list: &[Value], pe: &str) -> Option<usize> {
    if let Some(json) = pe.strip_prefix("k:") {
        let wanted: Map<String, Value> = serde_json::from_str(json).ok()?;
        let keys: Vec<&str> = wanted.keys().map(String::as_str).collect();
        list.iter().position(|item| key_pe(item, &keys).as_deref() == Some(pe))
    } else if let Some(json) = pe.strip_prefix("v:") {
        let wanted: Value = serde_json::from_str(json).ok()?;
        list.iter().position(|item| *item == wanted)
    } else {
        pe.strip_prefix("i:")?.parse().ok()
    }
}

/// The value at `path` inside `root`.
pub(crate) fn get_at<'v>(root: &'v Value, path: &[Pe]) -> Option<&'v Value> {
    let mut cur = root;
    for pe in path {
        cur = match cur {
            Value::Object(m) => m.get(pe.strip_prefix("f:")?)?,
            Value::Array(list) => list.get(item_index(list, pe)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Removes the value at `path` from `root` (a map entry or a list item); a no-op when absent.
pub(crate) fn remove_at(root: &mut Value, path: &[Pe]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut cur = root;
    for pe in parents {
        let next = match cur {
            Value::Object(m) => pe.strip_prefix("f:").and_then(|f| m.get_mut(f)),
            Value::Array(list) => match item_index(list, pe) {
                Some(i) => list.get_mut(i),
                None => None,
            },
            _ => None,
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match cur {
        Value::Object(m) => {
            if let Some(f) = last.strip_prefix("f:") {
                m.remove(f);
            }
        }
        Value::Array(list) => {
            if let Some(i) = item_index(list, last) {
                list.remove(i);
            }
        }
        _ => {}
    }
}
