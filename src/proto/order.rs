//! Writes JSON with its keys in the order kube-apiserver writes them. kube encodes a built-in object
//! from its Go struct, and Go's encoding/json writes a struct's fields in declaration order (the
//! embedded TypeMeta's `kind` and `apiVersion` first) and a map's keys sorted. serde_json keeps an
//! object's keys sorted, which is Go's order for maps and for custom resources (kube holds those as
//! unstructured maps), so only the structs need the schema's field order, which `schema.rs` lists.
//! Clients that compare bytes, hash answers or show them to people see what kube would give them.

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use super::schema_types::{find, message, package_for, Field, Kind, Rep, Shape, INLINE};

/// The JSON of `v` in kube's key order: in its type's field order when `v` is a built-in object (its
/// `apiVersion` and `kind` name a type with a schema), else sorted.
pub fn to_vec(v: &Value) -> Vec<u8> {
    serde_json::to_vec(&Ordered::top(v)).expect("JSON values always serialise")
}

/// The JSON of an object of `api_version`/`kind` without its `apiVersion` and `kind`, in kube's key
/// order: what follows them in a whole object.
pub fn to_vec_untyped(api_version: &str, kind: &str, v: &Value) -> Vec<u8> {
    let how = type_index(api_version, kind).map_or(How::Sorted, How::Msg);
    serde_json::to_vec(&Ordered { v, how, typed: false }).expect("JSON values always serialise")
}

/// Whether objects of `api_version`/`kind` are written in a Go struct's field order (built-in types),
/// so that `kind` comes before `apiVersion`; custom resources are written sorted.
pub fn is_struct(api_version: &str, kind: &str) -> bool {
    type_index(api_version, kind).is_some()
}

/// The schema of a type by its `apiVersion` and `kind`. meta.k8s.io's kinds that kube writes with
/// apiVersion `v1` (Status, APIResourceList, APIVersions, ...) are found there.
fn type_index(api_version: &str, kind: &str) -> Option<u16> {
    let package = package_for(api_version)?;
    find(&format!("{package}.{kind}"))
        .or_else(|| (api_version == "v1").then(|| find(&format!("k8s.io.apimachinery.pkg.apis.meta.v1.{kind}")))?)
        .filter(|&i| message(i).shape == Shape::Object)
}

/// How a value's keys are ordered.
#[derive(Clone, Copy)]
enum How {
    /// A message's JSON (its shape says which).
    Msg(u16),
    /// A list of a message's values.
    List(u16),
    /// A map of a message's values (its keys sorted).
    Map(u16),
    /// An embedded object (RawExtension): in its own type's order if it names one.
    Embedded,
    /// Keys sorted, at every depth.
    Sorted,
}

/// A value with how its keys are ordered; `typed` is false when a top-level object's `apiVersion` and
/// `kind` are written elsewhere.
struct Ordered<'a> {
    v: &'a Value,
    how: How,
    typed: bool,
}

impl<'a> Ordered<'a> {
    fn top(v: &'a Value) -> Self {
        Ordered { v, how: How::Embedded, typed: true }
    }

    fn child(v: &'a Value, how: How) -> Self {
        Ordered { v, how, typed: true }
    }
}

impl Serialize for Ordered<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match (self.how, self.v) {
            (How::Sorted, v) => v.serialize(s),
            (How::Embedded, Value::Object(map)) => {
                let api_version = map.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
                let kind = map.get("kind").and_then(Value::as_str).unwrap_or_default();
                match type_index(api_version, kind) {
                    Some(index) => Ordered { v: self.v, how: How::Msg(index), typed: self.typed }.serialize(s),
                    None => self.v.serialize(s),
                }
            }
            (How::Msg(index), v) => message_value(index, v, self.typed, s),
            (How::List(index), Value::Array(items)) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Ordered::child(item, How::Msg(index)))?;
                }
                seq.end()
            }
            (How::Map(index), Value::Object(entries)) => {
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, item) in entries {
                    m.serialize_entry(k, &Ordered::child(item, How::Msg(index)))?;
                }
                m.end()
            }
            (_, v) => v.serialize(s),
        }
    }
}

/// A value of message `index`: an object's fields in the message's order; other shapes as they are.
fn message_value<S: Serializer>(index: u16, v: &Value, typed: bool, s: S) -> Result<S::Ok, S::Error> {
    let msg = message(index);
    match (msg.shape, v) {
        (Shape::Object, Value::Object(map)) => object(msg.fields, map, typed, s),
        (Shape::RawJson, v) => Ordered::child(v, How::Embedded).serialize(s),
        // JSONSchemaPropsOr*: a schema, or a list (of schemas or strings), or a bool.
        (Shape::SchemaOrArray | Shape::SchemaOrBool | Shape::SchemaOrStringArray, Value::Object(_)) => {
            match msg.fields.iter().find(|f| f.rep == Rep::S && matches!(f.kind, Kind::Msg(_))) {
                Some(Field { kind: Kind::Msg(schema), .. }) => Ordered::child(v, How::Msg(*schema)).serialize(s),
                _ => v.serialize(s),
            }
        }
        (Shape::SchemaOrArray, Value::Array(_)) => {
            match msg.fields.iter().find(|f| f.rep == Rep::L && matches!(f.kind, Kind::Msg(_))) {
                Some(Field { kind: Kind::Msg(schema), .. }) => Ordered::child(v, How::List(*schema)).serialize(s),
                _ => v.serialize(s),
            }
        }
        _ => v.serialize(s),
    }
}

/// An object of a struct: TypeMeta's `kind` and `apiVersion` first when the struct embeds it (they are
/// not among its fields), then its fields in declaration order, then keys Go would not know, sorted.
fn object<S: Serializer>(fields: &[Field], map: &Map<String, Value>, typed: bool, s: S) -> Result<S::Ok, S::Error> {
    let mut m = s.serialize_map(None)?;
    let mut written = 0;
    for key in ["kind", "apiVersion"] {
        if let Some(v) = map.get(key).filter(|_| !has_field(fields, key, 0)) {
            if typed {
                m.serialize_entry(key, v)?;
            }
            written += 1;
        }
    }
    write_fields(fields, map, &mut m, &mut written, 0)?;
    if written < map.len() {
        for (k, v) in map {
            // `kind` and `apiVersion` are written above when they are not fields.
            if !(k == "kind" || k == "apiVersion" || has_field(fields, k, 0)) {
                m.serialize_entry(k, &Ordered::child(v, How::Sorted))?;
            }
        }
    }
    m.end()
}

/// Nesting of inline structs followed; kube's types nest two deep at most.
const MAX_INLINE: usize = 8;

fn write_fields<M: SerializeMap>(
    fields: &[Field],
    map: &Map<String, Value>,
    m: &mut M,
    written: &mut usize,
    depth: usize,
) -> Result<(), M::Error> {
    for f in fields {
        if f.has(INLINE) {
            // An embedded struct's fields belong to this object, where the struct is declared.
            if let (Kind::Msg(index), true) = (f.kind, depth < MAX_INLINE) {
                let inner = message(index);
                if inner.shape == Shape::Object {
                    write_fields(inner.fields, map, m, written, depth + 1)?;
                }
            }
            continue;
        }
        let Some(v) = map.get(f.json) else { continue };
        let how = match (f.kind, f.rep) {
            (Kind::Msg(index), Rep::S) => How::Msg(index),
            (Kind::Msg(index), Rep::L) => How::List(index),
            (Kind::Msg(index), Rep::M) => How::Map(index),
            _ => How::Sorted,
        };
        m.serialize_entry(f.json, &Ordered::child(v, how))?;
        *written += 1;
    }
    Ok(())
}

/// Whether `key` is one of `fields`' JSON names, inline structs' included.
fn has_field(fields: &[Field], key: &str, depth: usize) -> bool {
    fields.iter().any(|f| {
        if f.has(INLINE) {
            match f.kind {
                Kind::Msg(index) if depth < MAX_INLINE && message(index).shape == Shape::Object => {
                    has_field(message(index).fields, key, depth + 1)
                }
                _ => false,
            }
        } else {
            f.json == key
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(v: &Value) -> String {
        String::from_utf8(to_vec(v)).unwrap()
    }

    #[test]
    fn a_built_in_object_is_written_in_its_go_structs_order() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "status": {"phase": "Pending"},
            "metadata": {"resourceVersion": "5", "name": "p", "namespace": "default", "uid": "u",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"z": "1", "a": "2"}},
            "spec": {"restartPolicy": "Always", "containers": [{"image": "i", "name": "c",
                     "resources": {}, "terminationMessagePath": "/dev/termination-log"}]}});
        assert_eq!(
            text(&pod),
            concat!(
                r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"default","uid":"u","#,
                r#""resourceVersion":"5","creationTimestamp":"2026-01-01T00:00:00Z","labels":{"a":"2","z":"1"}},"#,
                r#""spec":{"containers":[{"name":"c","image":"i","resources":{},"#,
                r#""terminationMessagePath":"/dev/termination-log"}],"restartPolicy":"Always"},"#,
                r#""status":{"phase":"Pending"}}"#
            )
        );
    }

    #[test]
    fn lists_statuses_and_discovery_follow_their_structs() {
        let list = json!({"apiVersion": "v1", "kind": "ConfigMapList",
            "metadata": {"resourceVersion": "9", "continue": "c"},
            "items": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}]});
        assert_eq!(
            text(&list),
            concat!(
                r#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c"},"#,
                r#""items":[{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"},"data":{"k":"v"}}]}"#
            )
        );
        let status = json!({"apiVersion": "v1", "kind": "Status", "code": 404, "message": "m",
            "metadata": {}, "reason": "NotFound", "status": "Failure", "details": {"name": "x", "kind": "pods"}});
        assert_eq!(
            text(&status),
            concat!(
                r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"m","#,
                r#""reason":"NotFound","details":{"name":"x","kind":"pods"},"code":404}"#
            )
        );
    }

    #[test]
    fn custom_resources_and_unknown_keys_are_sorted() {
        let cr = json!({"kind": "Widget", "apiVersion": "example.com/v1", "spec": {"b": 1, "a": 2}, "metadata": {"name": "w"}});
        assert_eq!(
            text(&cr),
            r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"a":2,"b":1}}"#
        );
        // A key Go's struct lacks comes after the struct's own, sorted.
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "zeta": 1, "alpha": 2, "data": {}});
        assert_eq!(text(&cm), r#"{"kind":"ConfigMap","apiVersion":"v1","data":{},"alpha":2,"zeta":1}"#);
    }

    #[test]
    fn crd_schemas_inline_structs_and_embedded_objects_keep_go_order() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"versions": [{"schema": {"openAPIV3Schema": {"type": "object", "description": "d",
                "properties": {"tags": {"items": {"type": "string", "format": "f"}, "type": "array"}}}}}]}});
        let s = text(&crd);
        assert!(s.contains(r#"{"description":"d","type":"object","properties":{"tags":{"type":"array","items":{"type":"string","format":"f"}}}}"#), "{s}");
        // A volume's source is an inline struct: its fields come where Go declares it, after the name.
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "spec": {"volumes": [{"configMap": {"name": "c"}, "name": "v"}]}});
        assert!(text(&pod).contains(r#"{"name":"v","configMap":{"name":"c"}}"#), "{}", text(&pod));
        // A watch event's object is written in its own type's order.
        let event =
            json!({"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}});
        assert_eq!(
            String::from_utf8(to_vec_untyped("meta.k8s.io/v1", "WatchEvent", &event)).unwrap(),
            r#"{"type":"ADDED","object":{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"n"}}}"#
        );
    }

    #[test]
    fn an_object_without_its_type_is_written_in_its_order() {
        let body = json!({"metadata": {"uid": "u", "name": "n"}, "data": {"k": "v"}});
        let s = String::from_utf8(to_vec_untyped("v1", "ConfigMap", &body)).unwrap();
        assert_eq!(s, r#"{"metadata":{"name":"n","uid":"u"},"data":{"k":"v"}}"#);
        assert!(is_struct("apps/v1", "Deployment"));
        assert!(!is_struct("example.com/v1", "Widget"));
    }
}
