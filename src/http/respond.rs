//! Building responses: JSON bodies, Status errors, and the `as=Table` / `as=PartialObjectMetadata`
//! transforms clients ask for in `Accept`.

use std::convert::Infallible;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use serde_json::{json, Value};

use crate::resources::ResourceDef;
use crate::status::ApiError;

/// Every response body.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// A full body from bytes.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).boxed_unsync()
}

/// A JSON response.
pub fn json(code: u16, v: &Value) -> Response<Body> {
    bytes(code, "application/json", serde_json::to_vec(v).expect("JSON serialises"))
}

/// A plain JSON list from objects already serialised (the watch cache keeps them so): the bytes are
/// joined, never parsed.
pub fn raw_list(def: &ResourceDef, list_meta: &Value, items: &[Bytes]) -> Response<Body> {
    let head = json!({"kind": def.list_kind(), "apiVersion": def.api_version(), "metadata": list_meta});
    let mut out = serde_json::to_vec(&head).expect("JSON serialises");
    out.pop(); // the closing brace; items follow
    let size: usize = items.iter().map(|b| b.len() + 1).sum();
    out.reserve(size + 12);
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    bytes(200, "application/json", out)
}

/// A response with raw bytes and a content type.
pub fn bytes(code: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    r
}

/// A Status error response (the one place errors become HTTP).
pub fn error(e: &ApiError) -> Response<Body> {
    let mut r = json(e.code, &e.to_status());
    if let Some(s) = e.retry_after {
        r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    r
}

/// Add `Warning: 299 - "<text>"` headers.
pub fn add_warnings(r: &mut Response<Body>, warnings: &[String]) {
    for w in warnings {
        let text = w.replace('"', "\\\"");
        if let Ok(v) = HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
}

/// What representation the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The objects themselves.
    Plain,
    /// `meta.k8s.io` Table.
    Table,
    /// `PartialObjectMetadata(List)`.
    Metadata,
}

/// Read the `Accept` header: the first `as=` transform we support, else plain JSON.
pub fn shape(accept: Option<&str>) -> Shape {
    let Some(accept) = accept else {
        return Shape::Plain;
    };
    for part in accept.split(',') {
        let params: Vec<&str> = part.split(';').map(str::trim).collect();
        let has = |k: &str, v: &str| params.iter().any(|p| p.split_once('=') == Some((k, v)));
        if params.first() != Some(&"application/json") {
            continue;
        }
        if has("as", "Table") && has("g", "meta.k8s.io") {
            return Shape::Table;
        }
        if (has("as", "PartialObjectMetadataList") || has("as", "PartialObjectMetadata")) && has("g", "meta.k8s.io") {
            return Shape::Metadata;
        }
        if params.len() == 1 {
            return Shape::Plain;
        }
    }
    Shape::Plain
}

/// `includeObject` for Tables.
pub fn include_object(q: &crate::request::Query) -> crate::table::IncludeObject {
    match q.get("includeObject") {
        Some("None") => crate::table::IncludeObject::None,
        Some("Object") => crate::table::IncludeObject::Object,
        _ => crate::table::IncludeObject::Metadata,
    }
}

fn partial(obj: &Value) -> Value {
    json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// Render one object in the requested shape.
pub fn render_object(
    def: &ResourceDef,
    obj: &Value,
    shape: Shape,
    include: crate::table::IncludeObject,
    with_columns: bool,
) -> Value {
    match shape {
        Shape::Plain => obj.clone(),
        Shape::Metadata => partial(obj),
        Shape::Table => {
            let mut t = table(
                def,
                std::slice::from_ref(obj),
                json!({"resourceVersion": obj["metadata"]["resourceVersion"]}),
                include,
                with_columns,
            );
            if !with_columns {
                if let Some(m) = t.as_object_mut() {
                    m.remove("columnDefinitions");
                }
            }
            t
        }
    }
}

/// Render a list in the requested shape.
pub fn render_list(
    def: &ResourceDef,
    items: Vec<Value>,
    list_meta: Value,
    shape: Shape,
    include: crate::table::IncludeObject,
) -> Value {
    match shape {
        Shape::Plain => {
            json!({"kind": def.list_kind(), "apiVersion": def.api_version(), "metadata": list_meta, "items": items})
        }
        Shape::Metadata => {
            let items: Vec<Value> = items.iter().map(partial).collect();
            json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta, "items": items})
        }
        Shape::Table => table(def, &items, list_meta, include, true),
    }
}

/// A Table of objects: the built-in columns of the type, or a custom resource's printer columns.
fn table(
    def: &ResourceDef,
    items: &[Value],
    list_meta: Value,
    include: crate::table::IncludeObject,
    with_columns: bool,
) -> Value {
    let now = chrono::Utc::now();
    match &def.custom {
        Some(c) => crate::table::custom_table(&c.columns, items, list_meta, include, with_columns, now),
        None => crate::table::table(&def.group, &def.plural, items, list_meta, include, with_columns, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_table_accept_is_recognised() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(shape(Some(a)), Shape::Table);
        assert_eq!(shape(Some("application/json")), Shape::Plain);
        assert_eq!(shape(Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")), Shape::Metadata);
        assert_eq!(shape(None), Shape::Plain);
        assert_eq!(shape(Some("application/vnd.kubernetes.protobuf,application/json")), Shape::Plain);
    }

    #[test]
    fn errors_carry_retry_after() {
        let r = error(&ApiError::unavailable("down"));
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }
}
