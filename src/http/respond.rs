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

/// Bytes per chunk of a list body built from cached objects. Each chunk leaves as one HTTP/2 DATA frame
/// when the client takes frames that large (client-go has announced 1 MiB since Kubernetes 1.32) and as
/// one HTTP/1.1 chunk: 256 KiB made a 4 MiB list 5-15% faster than 64 KiB did, fewer frames and
/// chunks for both ends to handle. Small enough to come from the allocator's reused memory after the
/// first list rather than fresh pages (one buffer of a 4 MiB list cost a page fault per 4 KiB on every
/// list).
const LIST_CHUNK: usize = 256 * 1024;

/// A plain JSON list from objects already serialised (the watch cache keeps them so): the bytes are
/// joined, never parsed, a chunk at a time as the connection takes them, so the first bytes leave
/// before the last object is looked at and no buffer of the whole list is ever allocated. `fill` hands
/// the objects' JSON in order to its argument, each in two pieces that are joined (a head and the rest,
/// as the watch cache keeps them), until that declines one (which comes first next time), and returns
/// true when none is left. A list that fits in one chunk is sent whole with its length;
/// a longer one goes without a Content-Length, as kube-apiserver's large lists do, since its length is
/// not known before its last object is read.
pub fn raw_list<F>(def: &ResourceDef, list_meta: &Value, fill: F) -> Response<Body>
where
    F: FnMut(&mut dyn FnMut(&[u8], &[u8]) -> bool) -> bool + Send + Unpin + 'static,
{
    let head = json!({"kind": def.list_kind(), "apiVersion": def.api_version(), "metadata": list_meta});
    let mut head = serde_json::to_vec(&head).expect("JSON serialises");
    head.pop(); // the closing brace; items follow
    head.extend_from_slice(b",\"items\":[");
    head.reserve(FIRST_CHUNK);
    let mut body = ListBody { ready: None, fill, first: true, done: false };
    let first = body.join(head);
    if body.done {
        // Also lets the objects go at once, whoever reads the answer slowly.
        return bytes(200, "application/json", first);
    }
    body.ready = Some(first);
    let mut r = Response::new(body.boxed_unsync());
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// The body of a list of serialised objects, joined into chunks as it is polled.
struct ListBody<F> {
    /// A chunk joined before the first poll.
    ready: Option<Bytes>,
    fill: F,
    /// No object has been written yet (no comma before the next).
    first: bool,
    /// The closing bytes are joined.
    done: bool,
}

/// Room the first chunk starts with: most lists are small, and later chunks get `LIST_CHUNK` at once
/// (a chunk grown by doubling would copy its bytes again).
const FIRST_CHUNK: usize = 8 * 1024;

impl<F: FnMut(&mut dyn FnMut(&[u8], &[u8]) -> bool) -> bool> ListBody<F> {
    /// Join objects after what `chunk` holds, up to `LIST_CHUNK` bytes, closing the list after the last.
    fn join(&mut self, mut chunk: Vec<u8>) -> Bytes {
        let first = &mut self.first;
        let drained = (self.fill)(&mut |head, rest| {
            // An object larger than a chunk goes alone in one.
            if !chunk.is_empty() && chunk.len() + head.len() + rest.len() + 1 > LIST_CHUNK {
                return false;
            }
            if !std::mem::take(first) {
                chunk.push(b',');
            }
            chunk.extend_from_slice(head);
            chunk.extend_from_slice(rest);
            true
        });
        if drained {
            chunk.extend_from_slice(b"]}");
            self.done = true;
        }
        Bytes::from(chunk)
    }

    fn next_chunk(&mut self) -> Option<Bytes> {
        if let Some(ready) = self.ready.take() {
            return Some(ready);
        }
        (!self.done).then(|| self.join(Vec::with_capacity(LIST_CHUNK)))
    }
}

impl<F: FnMut(&mut dyn FnMut(&[u8], &[u8]) -> bool) -> bool + Unpin> http_body::Body for ListBody<F> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.next_chunk().map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.ready.is_none()
    }
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
    fn raw_lists_are_valid_json_in_bounded_chunks() {
        use http_body_util::BodyExt;
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let big = format!(r#"{{"big":"{}"}}"#, "x".repeat(LIST_CHUNK + 10));
        // Objects of over 300 bytes: enough for several chunks.
        let many = LIST_CHUNK / 100;
        for n in [0, 1, 3, many] {
            let mut items: Vec<Bytes> =
                (0..n).map(|i| Bytes::from(format!(r#"{{"i":{i},"pad":"{}"}}"#, "y".repeat(300)))).collect();
            if n == 3 {
                items.insert(1, Bytes::from(big.clone()));
            }
            let want: Vec<Value> = items.iter().map(|b| serde_json::from_slice(b).unwrap()).collect();
            let mut left = items.into_iter().peekable();
            let fill = move |take: &mut dyn FnMut(&[u8], &[u8]) -> bool| {
                while let Some(item) = left.peek() {
                    // Cut anywhere: the two pieces are joined.
                    let (head, rest) = item.split_at(item.len() / 3);
                    if !take(head, rest) {
                        return false;
                    }
                    left.next();
                }
                true
            };
            let mut body = raw_list(&def, &json!({"resourceVersion": "7"}), fill).into_body();
            let announced = http_body::Body::size_hint(&body).exact();
            let mut out = Vec::new();
            let mut chunks = 0;
            while let Some(f) = futures::executor::block_on(body.frame()) {
                let data = f.unwrap().into_data().unwrap();
                // Only the object larger than a chunk goes over, alone (with a comma and the list's end).
                let alone = data.windows(big.len()).any(|w| w == big.as_bytes()) && data.len() <= big.len() + 3;
                assert!(data.len() <= LIST_CHUNK + 2 || alone, "chunk of {} bytes", data.len());
                out.extend_from_slice(&data);
                chunks += 1;
            }
            assert!(http_body::Body::is_end_stream(&body));
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["kind"], "ConfigMapList");
            assert_eq!(v["metadata"]["resourceVersion"], "7");
            assert_eq!(v["items"].as_array().unwrap(), &want, "every object, in order");
            if n == many {
                assert!(chunks > 1, "a large list goes out in several chunks");
                assert_eq!(announced, None);
            } else if n < 3 {
                assert_eq!(announced, Some(out.len() as u64), "a list in one chunk has its length");
            }
        }
    }

    #[test]
    fn errors_carry_retry_after() {
        let r = error(&ApiError::unavailable("down"));
        assert_eq!(r.status(), 503);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }
}
