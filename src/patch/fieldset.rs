//! Field sets as stored in `managedFields[].fieldsV1`: a trie of encoded path elements
//! (`f:name`, `k:{"name":"a"}`, `v:"x"`, `i:0`), with `.` marking the node itself as a member.

use std::collections::{BTreeMap, HashMap};

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

    /// Removes the members of `other` (exact paths only, descendants stay). Each level walks the
    /// smaller side's children, so taking one set from each of many managers' costs what the managers'
    /// sets hold, not their number times the other set.
    pub fn subtract(&mut self, other: &FieldSet) {
        if other.member {
            self.member = false;
        }
        self.each_shared_child(other, FieldSet::subtract);
        self.prune();
    }

    /// `f` on each child of this set with the child of `other` under the same path element, walking
    /// the smaller side's children.
    fn each_shared_child(&mut self, other: &FieldSet, mut f: impl FnMut(&mut FieldSet, &FieldSet)) {
        if self.children.len() <= other.children.len() {
            for (k, mine) in self.children.iter_mut() {
                if let Some(c) = other.children.get(k) {
                    f(mine, c);
                }
            }
        } else {
            for (k, c) in &other.children {
                if let Some(mine) = self.children.get_mut(k) {
                    f(mine, c);
                }
            }
        }
    }

    /// The paths that are members of both sets, parents before their descendants, each level walking
    /// the smaller side (see `subtract`).
    pub fn common_members(&self, other: &FieldSet) -> Vec<Vec<Pe>> {
        let mut out = Vec::new();
        self.common(other, &mut Vec::new(), &mut out);
        out
    }

    fn common(&self, other: &FieldSet, prefix: &mut Vec<Pe>, out: &mut Vec<Vec<Pe>>) {
        if self.member && other.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        let (small, large) = if self.children.len() <= other.children.len() { (self, other) } else { (other, self) };
        for (k, a) in &small.children {
            if let Some(b) = large.children.get(k) {
                prefix.push(k.clone());
                a.common(b, prefix, out);
                prefix.pop();
            }
        }
    }

    /// Removes the members of `other` together with everything below them.
    pub fn subtract_recursive(&mut self, other: &FieldSet) {
        if other.member {
            *self = FieldSet::default();
            return;
        }
        self.each_shared_child(other, FieldSet::subtract_recursive);
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

/// A list's items by the path element naming each (`k:{...}` by its key fields, `v:...` by its value,
/// `i:N` by its place), built once per list from one of its elements' path element, so that finding
/// the items of many paths costs the list's length once rather than once per path.
struct ListIndex(HashMap<String, usize>);

impl ListIndex {
    fn of(list: &[Value], sample: &str) -> ListIndex {
        let mut index = HashMap::with_capacity(list.len());
        if let Some(json) = sample.strip_prefix("k:") {
            let keys: Vec<String> = serde_json::from_str::<Map<String, Value>>(json)
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default();
            let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
            for (i, item) in list.iter().enumerate() {
                if let Some(pe) = key_pe(item, &keys) {
                    index.entry(pe).or_insert(i);
                }
            }
        } else if sample.starts_with("v:") {
            for (i, item) in list.iter().enumerate() {
                index.entry(value_pe(item)).or_insert(i);
            }
        } else {
            index.extend((0..list.len()).map(|i| (format!("i:{i}"), i)));
        }
        ListIndex(index)
    }

    fn get(&self, pe: &str) -> Option<usize> {
        self.0.get(pe).copied()
    }
}

/// What items a path element names them by: its kind, and for `k:` its key fields. Children of one
/// list named alike share an index.
fn naming(pe: &str) -> String {
    match pe.strip_prefix("k:") {
        Some(json) => {
            let keys = serde_json::from_str::<Map<String, Value>>(json).map(|m| m.keys().cloned().collect::<Vec<_>>());
            format!("k:{}", keys.unwrap_or_default().join(","))
        }
        None => pe.get(..2).unwrap_or_default().to_string(),
    }
}

/// The most ways of naming one list's items that are indexed (see `ListIndexes::position`).
const MAX_NAMINGS: usize = 8;

/// The indexes of one list, built as its children's path elements need them.
struct ListIndexes<'v> {
    list: &'v [Value],
    by_naming: HashMap<String, ListIndex>,
}

impl<'v> ListIndexes<'v> {
    fn new(list: &'v [Value]) -> Self {
        ListIndexes { list, by_naming: HashMap::new() }
    }

    /// The item `pe` names. A list's items are named one way, by its merge keys, or two while a type
    /// changes them; a field set naming them in more than [`MAX_NAMINGS`] ways (which only a
    /// client writing `managedFields` itself makes) finds nothing by the others, rather than index the
    /// whole list once for each way.
    fn position(&mut self, pe: &str) -> Option<usize> {
        let list = self.list;
        let naming = naming(pe);
        if self.by_naming.len() >= MAX_NAMINGS && !self.by_naming.contains_key(&naming) {
            return None;
        }
        self.by_naming.entry(naming).or_insert_with(|| ListIndex::of(list, pe)).get(pe)
    }
}

/// The children of `v` that `set`'s children name, each with its path element and set.
fn children<'v, 's>(v: &'v Value, set: &'s FieldSet) -> Vec<(&'s Pe, &'s FieldSet, Option<&'v Value>)> {
    match v {
        Value::Object(m) => {
            set.children.iter().map(|(pe, c)| (pe, c, pe.strip_prefix("f:").and_then(|f| m.get(f)))).collect()
        }
        Value::Array(list) => {
            let mut indexes = ListIndexes::new(list);
            set.children.iter().map(|(pe, c)| (pe, c, indexes.position(pe).and_then(|i| list.get(i)))).collect()
        }
        _ => set.children.iter().map(|(pe, c)| (pe, c, None)).collect(),
    }
}

/// The leaves of `set` (members without children) whose value in `a` differs from the one in `b`,
/// walking the three trees together.
pub(crate) fn changed_leaves(set: &FieldSet, a: Option<&Value>, b: Option<&Value>) -> FieldSet {
    let mut out = FieldSet::default();
    if set.children.is_empty() {
        out.member = set.member && a != b;
        return out;
    }
    let b_children: HashMap<&Pe, Option<&Value>> = match b {
        Some(b) => children(b, set).into_iter().map(|(pe, _, v)| (pe, v)).collect(),
        None => HashMap::new(),
    };
    let a_children = match a {
        Some(a) => children(a, set),
        None => set.children.iter().map(|(pe, c)| (pe, c, None)).collect(),
    };
    for (pe, child, av) in a_children {
        let sub = changed_leaves(child, av, b_children.get(pe).copied().flatten());
        if !sub.is_empty() {
            out.children.insert(pe.clone(), sub);
        }
    }
    out
}

/// Removes from `root` every value `set` names as a member (with all below it), and looks below the
/// others, walking the two trees together.
pub(crate) fn remove_members(root: &mut Value, set: &FieldSet) {
    match root {
        Value::Object(m) => {
            for (pe, child) in &set.children {
                let Some(f) = pe.strip_prefix("f:") else { continue };
                if child.member {
                    m.remove(f);
                } else if let Some(v) = m.get_mut(f) {
                    remove_members(v, child);
                }
            }
        }
        Value::Array(list) => {
            let mut gone = vec![false; list.len()];
            let mut found = Vec::new();
            {
                let mut indexes = ListIndexes::new(list);
                for (pe, child) in &set.children {
                    if let Some(i) = indexes.position(pe) {
                        found.push((i, child));
                    }
                }
            }
            for (i, child) in found {
                if child.member {
                    gone[i] = true;
                } else {
                    remove_members(&mut list[i], child);
                }
            }
            let mut i = 0;
            list.retain(|_| {
                i += 1;
                !gone[i - 1]
            });
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_is_indexed_in_a_bounded_number_of_ways() {
        // Twenty ways of naming the items of a list: the first ones in key order are indexed and
        // act; the others find nothing, where each would have cost a pass over the whole list.
        let list: Vec<Value> = (0..20).map(|i| json!({format!("a{i:02}"): 1})).collect();
        let mut root = Value::Array(list);
        let mut set = FieldSet::default();
        for i in 0..20 {
            set.insert(&[format!("k:{{\"a{i:02}\":1}}")]);
        }
        remove_members(&mut root, &set);
        let left: Vec<String> =
            root.as_array().unwrap().iter().flat_map(|v| v.as_object().unwrap().keys().cloned()).collect();
        assert_eq!(left.len(), 20 - MAX_NAMINGS, "{left:?}");
        assert_eq!(left[0], format!("a{MAX_NAMINGS:02}"));
    }
}
