//! Building responses: JSON bodies, Status errors, and the `as=Table` / `as=PartialObjectMetadata`
//! transforms clients ask for in `Accept`.

use std::collections::VecDeque;
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

/// A JSON response, ending with a newline as Go's `json.Encoder` (and so kube-apiserver) writes
/// every answer: clients compare whole bodies and error strings.
pub fn json(code: u16, v: &Value) -> Response<Body> {
    let mut body = crate::proto::order::to_vec(v);
    body.push(b'\n');
    bytes(code, "application/json", body)
}

/// Bytes per chunk of a list body built from cached objects. Each chunk leaves as one HTTP/2 DATA frame
/// when the client takes frames that large (client-go has announced 1 MiB since Kubernetes 1.32) and as
/// one HTTP/1.1 chunk: 256 KiB made a 4 MiB list 5-15% faster than 64 KiB did, fewer frames and
/// chunks for both ends to handle. Small enough to come from the allocator's reused memory after the
/// first list rather than fresh pages (one buffer of a 4 MiB list cost a page fault per 4 KiB on every
/// list).
const LIST_CHUNK: usize = 256 * 1024;

/// A piece of a list's items, as `raw_list`'s `fill` hands them over.
pub enum Piece<'a> {
    /// One object's JSON in two pieces that are joined: its head and the rest.
    Object(&'a [u8], &'a [u8]),
    /// Objects ready to be sent as they are, each after a comma: `,{…},{…}` (never empty).
    Run(&'a Bytes),
}

/// A plain JSON list from objects already serialised (the watch cache keeps them so): the bytes are
/// joined, never parsed, a chunk at a time as the connection takes them, so the first bytes leave
/// before the last object is looked at and no buffer of the whole list is ever allocated. `fill` hands
/// the pieces in order to its argument until that declines one (which comes first next time), and
/// returns true when none is left. Objects are copied into chunks; a long run goes out as it is, in a
/// chunk of its own. A list joined whole at once (it fits in one chunk, or a run ends it) is sent with
/// its length; a longer one goes without a Content-Length, as kube-apiserver's large lists do, since
/// its length is not known before its last object is read.
pub fn raw_list<F>(def: &ResourceDef, list_meta: &Value, fill: F) -> Response<Body>
where
    F: FnMut(&mut dyn FnMut(Piece<'_>) -> bool) -> bool + Send + Unpin + 'static,
{
    let (mut head, tail) = list_ends(def, list_meta);
    head.reserve(FIRST_CHUNK);
    let mut body = ListBody { ready: VecDeque::new(), fill, tail, first: true, after_run: false, done: false };
    body.join(head);
    if body.done && body.ready.len() == 1 {
        // Also lets the objects go at once, whoever reads the answer slowly.
        return bytes(200, "application/json", body.ready.pop_front().unwrap_or_default());
    }
    let mut r = Response::new(body.boxed_unsync());
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// What comes before a list's first item and after its last, in kube's key order: a built-in type's
/// list is a Go struct (kind, apiVersion, metadata, items), a custom resource's a sorted map (apiVersion,
/// items, kind, metadata).
fn list_ends(def: &ResourceDef, list_meta: &Value) -> (Vec<u8>, Bytes) {
    let (api_version, list_kind) = (def.api_version(), def.list_kind());
    if crate::proto::order::is_struct(&api_version, &list_kind) {
        let head = json!({"kind": list_kind, "apiVersion": api_version, "metadata": list_meta});
        let mut head = crate::proto::order::to_vec(&head);
        head.pop(); // the closing brace; items follow
        head.extend_from_slice(b",\"items\":[");
        return (head, Bytes::from_static(b"]}\n"));
    }
    let mut head = b"{\"apiVersion\":".to_vec();
    head.extend(serde_json::to_vec(&api_version).expect("strings serialise"));
    head.extend_from_slice(b",\"items\":[");
    let mut tail = b"],\"kind\":".to_vec();
    tail.extend(serde_json::to_vec(&list_kind).expect("strings serialise"));
    tail.extend_from_slice(b",\"metadata\":");
    tail.extend(serde_json::to_vec(list_meta).expect("JSON serialises"));
    tail.extend_from_slice(b"}\n");
    (head, Bytes::from(tail))
}

/// The body of a list of serialised objects, joined into chunks as it is polled.
struct ListBody<F> {
    /// Chunks ready to go, in order.
    ready: VecDeque<Bytes>,
    fill: F,
    /// What follows the last item.
    tail: Bytes,
    /// No object has been written yet (no comma before the next).
    first: bool,
    /// The last piece taken was a run sent as it is.
    after_run: bool,
    /// The closing bytes are in `ready`.
    done: bool,
}

/// Room the first chunk starts with: most lists are small, and later chunks get `LIST_CHUNK` at once
/// (a chunk grown by doubling would copy its bytes again).
const FIRST_CHUNK: usize = 8 * 1024;

/// A run at least this long goes out as it is, in a chunk of its own; a shorter one is copied into the
/// chunk being joined, since a chunk (a DATA frame to send and to read) costs more than copying a few
/// KiB. Runs of packed objects are up to a block (256 KiB) long.
const MIN_RUN: usize = 16 * 1024;

impl<F: FnMut(&mut dyn FnMut(Piece<'_>) -> bool) -> bool> ListBody<F> {
    /// Join pieces after what `chunk` holds, up to `LIST_CHUNK` bytes or a long run, and queue the
    /// result, closing the list after the last piece.
    fn join(&mut self, mut chunk: Vec<u8>) {
        let (first, after_run) = (&mut self.first, &mut self.after_run);
        let mut alone = None;
        let drained = (self.fill)(&mut |piece| {
            if alone.is_some() {
                return false;
            }
            // The list's first object has no comma before it; a run brings its own.
            let skip = usize::from(*first);
            let (comma, head, rest): (&[u8], &[u8], &[u8]) = match &piece {
                Piece::Object(head, rest) => (&b","[skip..], head, rest),
                Piece::Run(run) if run.len() >= MIN_RUN + skip => {
                    debug_assert_eq!(run.first(), Some(&b','));
                    alone = Some(run.slice(skip..));
                    *first = false;
                    *after_run = true;
                    return true;
                }
                Piece::Run(run) => (&[], &[], run.get(skip..).unwrap_or_default()),
            };
            // An object larger than a chunk goes alone in one.
            if !chunk.is_empty() && chunk.len() + comma.len() + head.len() + rest.len() > LIST_CHUNK {
                return false;
            }
            if chunk.capacity() == 0 {
                // Only now: a chunk of nothing but a run needs none. Between two runs of a packed
                // cache there are usually a few objects written since it was packed.
                chunk.reserve(if *after_run { FIRST_CHUNK } else { LIST_CHUNK });
            }
            chunk.extend_from_slice(comma);
            chunk.extend_from_slice(head);
            chunk.extend_from_slice(rest);
            *first = false;
            *after_run = false;
            true
        });
        self.done = drained;
        if drained && alone.is_none() {
            chunk.extend_from_slice(&self.tail);
        }
        if !chunk.is_empty() {
            self.ready.push_back(Bytes::from(chunk));
        }
        if let Some(run) = alone {
            self.ready.push_back(run);
            if drained {
                self.ready.push_back(self.tail.clone());
            }
        }
    }

    fn next_chunk(&mut self) -> Option<Bytes> {
        while self.ready.is_empty() && !self.done {
            self.join(Vec::new());
        }
        self.ready.pop_front()
    }
}

impl<F: FnMut(&mut dyn FnMut(Piece<'_>) -> bool) -> bool + Unpin> http_body::Body for ListBody<F> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.next_chunk().map(|c| Ok(http_body::Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.done && self.ready.is_empty()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        // A list joined whole before its first poll (small, but with a run sent as it is) has a length.
        match self.done {
            true => http_body::SizeHint::with_exact(self.ready.iter().map(|c| c.len() as u64).sum()),
            false => http_body::SizeHint::default(),
        }
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

/// Characters of warnings a response carries before each is cut short (kube-apiserver's recorder).
const WARNINGS_TOTAL: usize = 4 * 1024;
/// What each warning is cut to once they are over `WARNINGS_TOTAL`.
const WARNING_CUT: usize = 256;

/// Add `Warning: 299 - "<text>"` headers as kube-apiserver's warning recorder does: each text once; when
/// they come to more than `WARNINGS_TOTAL` characters, each is cut to `WARNING_CUT` and no more are added
/// once that total is reached, so a request cannot make headers a client refuses (or that cost the
/// server their size again).
pub fn add_warnings(r: &mut Response<Body>, warnings: &[String]) {
    let mut seen = std::collections::HashSet::new();
    let unique: Vec<&str> = warnings.iter().map(String::as_str).filter(|w| !w.is_empty() && seen.insert(*w)).collect();
    let cutting = unique.iter().map(|w| w.chars().count()).sum::<usize>() > WARNINGS_TOTAL;
    let mut written = 0;
    for w in unique {
        if cutting && written >= WARNINGS_TOTAL {
            break;
        }
        let text = match w.char_indices().nth(WARNING_CUT) {
            Some((end, _)) if cutting => &w[..end],
            _ => w,
        };
        written += text.chars().count();
        let text = text.replace('"', "\\\"");
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
        None if crate::registry::converts(def) => {
            // Columns from the object as stored, as kube prints from its internal form (a v1
            // autoscaler's targets are all in v2's metrics); a row's object stays the one asked for.
            let stored: Vec<Value> = items
                .iter()
                .map(|o| {
                    let mut o = o.clone();
                    // An object that was stored converts back; were it not to, its row shows less.
                    let _ = crate::registry::to_storage(def, &mut o);
                    o
                })
                .collect();
            let mut t = crate::table::table(&def.group, &def.plural, &stored, list_meta, include, with_columns, now);
            if include == crate::table::IncludeObject::Object {
                let rows = t["rows"].as_array_mut().into_iter().flatten();
                for (row, item) in rows.zip(items) {
                    row["object"] = item.clone();
                }
            }
            t
        }
        None => crate::table::table(&def.group, &def.plural, items, list_meta, include, with_columns, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_are_sent_once_each_and_cut_short_past_kubes_total() {
        let texts = |r: &Response<Body>| -> Vec<String> {
            r.headers().get_all(header::WARNING).iter().map(|v| v.to_str().unwrap().to_string()).collect()
        };
        let mut r = bytes(200, "text/plain", "");
        add_warnings(&mut r, &["a \"b\"".into(), "a \"b\"".into(), String::new(), "c".into()]);
        assert_eq!(texts(&r), ["299 - \"a \\\"b\\\"\"", "299 - \"c\""]);
        let many: Vec<String> = (0..10_000).map(|i| format!("unknown field {i}{}", "x".repeat(300))).collect();
        let mut r = bytes(200, "text/plain", "");
        add_warnings(&mut r, &many);
        let sent = texts(&r);
        assert_eq!(sent.len(), WARNINGS_TOTAL / WARNING_CUT);
        assert!(sent.iter().all(|w| w.len() == WARNING_CUT + "299 - \"\"".len()), "{}", sent[0]);
    }

    #[test]
    fn kubectl_table_accept_is_recognised() {
        let a = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(shape(Some(a)), Shape::Table);
        assert_eq!(shape(Some("application/json")), Shape::Plain);
        assert_eq!(shape(Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")), Shape::Metadata);
        assert_eq!(shape(None), Shape::Plain);
        assert_eq!(shape(Some("application/vnd.kubernetes.protobuf,application/json")), Shape::Plain);
    }

    /// How a test list's items are handed to `raw_list`.
    #[derive(Clone, Copy)]
    enum Given {
        /// Each as an object.
        Objects,
        /// In runs of this many (each item after a comma, as packed blocks hold them).
        Runs(usize),
    }

    /// Every object of a list once, in order, in valid JSON, whether handed over as objects or runs;
    /// chunks stay bounded but for what cannot be cut; a long run goes out as it was given, not
    /// copied; a list in one chunk has its length.
    #[test]
    fn raw_lists_are_valid_json_in_bounded_chunks() {
        use http_body_util::BodyExt;
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let big = format!(r#"{{"big":"{}"}}"#, "x".repeat(LIST_CHUNK + 10));
        // Objects of over 300 bytes: enough for several chunks.
        let many = LIST_CHUNK / 100;
        let long_run = MIN_RUN / 300 + 1;
        let cases = [
            (0, Given::Objects),
            (1, Given::Objects),
            (3, Given::Objects),
            (many, Given::Objects),
            (1, Given::Runs(1)),
            (many, Given::Runs(3)),
            (many, Given::Runs(long_run)),
            (long_run, Given::Runs(long_run)),
        ];
        for (n, given) in cases {
            let mut items: Vec<Bytes> =
                (0..n).map(|i| Bytes::from(format!(r#"{{"i":{i},"pad":"{}"}}"#, "y".repeat(300)))).collect();
            if n == 3 {
                items.insert(1, Bytes::from(big.clone()));
            }
            let want: Vec<Value> = items.iter().map(|b| serde_json::from_slice(b).unwrap()).collect();
            let per = match given {
                Given::Objects => 1,
                Given::Runs(k) => k,
            };
            let groups: Vec<Vec<Bytes>> = items.chunks(per).map(<[Bytes]>::to_vec).collect();
            // Each run as its bytes would lie in a block, and where its bytes are.
            let runs: Vec<Bytes> =
                groups.iter().map(|g| g.iter().flat_map(|i| [&b","[..], i].concat()).collect()).collect();
            let long_runs: Vec<usize> = match given {
                Given::Runs(_) => runs.iter().filter(|r| r.len() > MIN_RUN).map(|r| r.as_ptr() as usize).collect(),
                Given::Objects => Vec::new(),
            };
            // Kept, so that no chunk is allocated where a run was.
            let _kept = runs.clone();
            let mut left = groups.into_iter().zip(runs).peekable();
            let fill = move |take: &mut dyn FnMut(Piece<'_>) -> bool| {
                while let Some((group, run)) = left.peek() {
                    let taken = match given {
                        Given::Runs(_) => take(Piece::Run(run)),
                        // Cut anywhere: the two pieces are joined.
                        Given::Objects => {
                            let (head, rest) = group[0].split_at(group[0].len() / 3);
                            take(Piece::Object(head, rest))
                        }
                    };
                    if !taken {
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
            let mut sent_as_given = 0;
            while let Some(f) = futures::executor::block_on(body.frame()) {
                let data = f.unwrap().into_data().unwrap();
                // Only the object larger than a chunk goes over, alone (with a comma and the list's end).
                let alone = data.windows(big.len()).any(|w| w == big.as_bytes()) && data.len() <= big.len() + 3;
                assert!(data.len() <= LIST_CHUNK + 2 || alone, "chunk of {} bytes", data.len());
                // A long run's bytes (all but its comma when it comes first).
                if long_runs.iter().any(|&p| data.as_ptr() as usize == p || data.as_ptr() as usize == p + 1) {
                    sent_as_given += 1;
                }
                out.extend_from_slice(&data);
                chunks += 1;
            }
            assert!(http_body::Body::is_end_stream(&body));
            let v: Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["kind"], "ConfigMapList");
            assert_eq!(v["metadata"]["resourceVersion"], "7");
            assert_eq!(v["items"].as_array().unwrap(), &want, "every object, in order");
            assert_eq!(sent_as_given, long_runs.len(), "each long run is sent as it was given");
            if matches!(given, Given::Runs(k) if k == long_run) {
                assert!(!long_runs.is_empty());
            }
            if n == many {
                assert!(chunks > 1, "a large list goes out in several chunks");
                assert_eq!(announced, None);
            } else if n < 3 || n == long_run {
                assert_eq!(announced, Some(out.len() as u64), "a list joined whole has its length");
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
