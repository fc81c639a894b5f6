//! Fuzz targets: every parser that takes request bytes, each as a function of raw bytes that must return
//! (an error is fine) without panicking, hanging or taking memory out of proportion to its input. The
//! cargo-fuzz crate in `fuzz/` drives them under libFuzzer (nightly); `tests/fuzz_corpus.rs` replays their
//! seeds and every input a fuzzer found, on stable, in the ordinary test suite.
//!
//! Targets that take two inputs (an object and a patch, a schema and an object) split the bytes at their
//! first NUL.

use serde_json::{json, Value};

use crate::registry::{DeleteOptions, ListOptions, WriteOptions};

/// A fuzz target: its name, as `fuzz/fuzz_targets/<name>.rs` and the corpus directories name it, and its
/// function.
pub type Target = (&'static str, fn(&[u8]));

/// Every target.
pub const TARGETS: &[Target] = &[
    ("body", body),
    ("protobuf", protobuf),
    ("selectors", selectors),
    ("route", route),
    ("token", token),
    ("continue_token", continue_token),
    ("json_patch", json_patch),
    ("merge_patch", merge_patch),
    ("strategic_merge", strategic_merge),
    ("apply", apply),
    ("crd", crd),
    ("openapi", openapi),
    ("table", table),
];

/// The bytes before and after the first NUL (all and nothing when there is none).
fn split(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[]),
    }
}

/// The bytes as a tree (JSON, else YAML), or `None`.
fn tree(data: &[u8]) -> Option<Value> {
    crate::codec::yaml_or_json(data).ok().map(|d| d.value)
}

/// A request body in JSON, YAML and every content type a write accepts.
pub fn body(data: &[u8]) {
    let _ = crate::codec::json(data);
    let _ = crate::codec::yaml(data);
    for ct in ["application/json", "application/yaml", "application/apply-patch+yaml", "text/plain"] {
        let _ = crate::http::body::decode_object(Some(ct), data);
    }
    // What every built-in write does to a decoded body: Go's zero values, by the body's own kind and
    // by a few deep ones.
    if let Ok(decoded) = crate::http::body::decode_object(Some("application/json"), data) {
        let own = (decoded.value["apiVersion"].as_str(), decoded.value["kind"].as_str());
        let own = (own.0.unwrap_or("v1").to_string(), own.1.unwrap_or("Pod").to_string());
        for (api_version, kind) in [(own.0.as_str(), own.1.as_str()), ("apps/v1", "DaemonSet"), ("v1", "Pod")] {
            let mut v = decoded.value.clone();
            // The fields of gates that are off, dropped as on a create, and as on an update that keeps them.
            let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
            let mut dropped = v.clone();
            crate::registry::drop_disabled(group, kind, &mut dropped, None);
            crate::registry::drop_disabled(group, kind, &mut v, Some(&dropped));
            crate::proto::go_shape(api_version, kind, &mut v);
            // kube's type checks, and an update from nothing to it, back, and to itself (every
            // kept-field rule, the diffs they print, and lists compared with lists).
            let _ = crate::registry::kind_errors(api_version, kind, &v, None);
            let _ = crate::registry::kind_errors(api_version, kind, &v, Some(&v));
            let empty = json!({"spec": {}});
            let _ = crate::registry::update_errors(kind, &empty, &v);
            let _ = crate::registry::update_errors(kind, &v, &empty);
            let _ = crate::registry::update_errors(kind, &v, &v);
            // A status write's checks, from nothing and from itself.
            let _ = crate::registry::status_errors(kind, &empty, &v);
            let _ = crate::registry::status_errors(kind, &v, &v);
        }
        // As an autoscaling/v1 HorizontalPodAutoscaler: converted to the stored v2 (which reads the
        // JSON its annotations carry) and back.
        if let Some(v1) = crate::resources::find("autoscaling", "v1", "horizontalpodautoscalers") {
            let mut v = decoded.value;
            if crate::registry::to_storage(&v1, &mut v).is_ok() {
                crate::registry::from_storage(&v1, &mut v);
            }
        }
    }
}

/// A Kubernetes protobuf body (`k8s\0` envelope), with and without its prefix.
pub fn protobuf(data: &[u8]) {
    let _ = crate::proto::decode(data);
    let mut prefixed = b"k8s\0".to_vec();
    prefixed.extend_from_slice(data);
    if let Ok(mut v) = crate::proto::decode(&prefixed) {
        let (api_version, kind) =
            (v["apiVersion"].as_str().map(str::to_string), v["kind"].as_str().map(str::to_string));
        crate::proto::go_shape(api_version.as_deref().unwrap_or(""), kind.as_deref().unwrap_or(""), &mut v);
    }
}

/// Label and field selectors, parsed and matched against an object.
pub fn selectors(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let obj = json!({"metadata": {"name": "n", "namespace": "ns", "labels": {"a": "b", "app": "web"}}, "spec": {"nodeName": "x"}});
    if let Ok(s) = crate::selector::LabelSelector::parse(&text) {
        let _ = s.matches(crate::meta::labels(&obj));
    }
    if let Ok(f) = crate::selector::FieldSelector::parse(&text) {
        let _ = f.matches(&|field: &str| crate::selector::field_value("", "pods", &obj, field));
    }
}

/// A request's path (with a cluster header) and query, as routing and the option parsers read them.
pub fn route(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (path, query) = text.split_once('?').unwrap_or((&text, ""));
    let (path, header) = path.split_once('\n').map_or((path, None), |(p, h)| (p, Some(h)));
    if let Ok((_, rest)) = crate::cluster::resolve(path, header) {
        let _ = crate::request::parse_route(rest);
    }
    let q = crate::request::Query::parse(Some(query));
    let _ = ListOptions::from_query(&q, false);
    let _ = ListOptions::from_query(&q, true);
    let _ = WriteOptions::from_query(&q);
    let _ = DeleteOptions::parse(None, &q);
}

/// A bearer token: the header's scheme, and the token checked against a signing key.
pub fn token(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = crate::http::tokens::bearer(Some(&text));
    let _ = crate::token::Signer::new(vec![7; 32]).verify(&text, 0);
}

/// A list's `continue` token, and a list's across shards with its composite resourceVersion.
pub fn continue_token(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = crate::registry::decode_continue(&text);
    let shards = crate::shard::Shards::single();
    let _ = crate::http::fanout::reads_as_cursor(&text, &shards);
    let _ = shards.decode(&text);
}

/// A JSON patch (after the NUL) to an object (before it).
pub fn json_patch(data: &[u8]) {
    let (target, patch) = split(data);
    if let (Some(t), Ok(p)) = (tree(target), crate::codec::json(patch)) {
        let _ = crate::patch::json_patch(&t, p.value);
    }
}

/// A JSON merge patch (after the NUL) to an object (before it).
pub fn merge_patch(data: &[u8]) {
    let (target, patch) = split(data);
    if let (Some(t), Ok(p)) = (tree(target), crate::codec::json(patch)) {
        let _ = crate::patch::merge_patch(&t, &p.value);
    }
}

/// A strategic merge patch (after the NUL) to a Deployment and a Pod (before it).
pub fn strategic_merge(data: &[u8]) {
    let (target, patch) = split(data);
    if let (Some(t), Ok(p)) = (tree(target), crate::codec::json(patch)) {
        for kind in ["apps/Deployment", "/Pod", "/Service"] {
            let _ = crate::patch::strategic_merge_patch(&t, p.value.clone(), kind);
        }
    }
}

/// A server-side apply (after the NUL) to a live object (before it), its managedFields included.
pub fn apply(data: &[u8]) {
    let (live, applied) = split(data);
    let (Some(applied), live) = (tree(applied), tree(live)) else { return };
    for force in [false, true] {
        let _ = crate::patch::managed::apply(crate::patch::managed::ApplyRequest {
            live: live.as_ref(),
            applied: &applied,
            manager: "fuzz",
            force,
            api_version: "apps/v1",
            kind_key: "apps/Deployment",
            now: "2026-01-01T00:00:00Z",
            subresource: None,
        });
    }
}

/// A CustomResourceDefinition (before the NUL), checked as kgate checks CRDs, and an object (after it)
/// checked, defaulted and pruned against its first version's schema.
pub fn crd(data: &[u8]) {
    let (definition, object) = split(data);
    let Some(crd) = tree(definition) else { return };
    let _ = crate::crd::define::validate(&crd, None);
    let _ = crate::crd::define::Crd::parse(&crd, 1);
    let Some(schema) = crd.pointer("/spec/versions/0/schema/openAPIV3Schema") else { return };
    let mut patterns = Vec::new();
    crate::crd::schema::bad_patterns(schema, "", &mut patterns);
    if let Some(mut obj) = tree(object) {
        let _ = crate::crd::schema::value_errors(schema, &obj);
        let _ = crate::crd::schema::unknown_fields(schema, &obj);
        let _ = crate::crd::schema::apply_defaults(schema, &mut obj);
        crate::crd::schema::prune(schema, &mut obj);
    }
}

/// An object checked against the built-in kinds' OpenAPI schemas, as a write is.
pub fn openapi(data: &[u8]) {
    let Some(obj) = tree(data) else { return };
    let schemas = crate::openapi::Builtins::get();
    for (group, version, kind) in [("", "v1", "Pod"), ("apps", "v1", "Deployment"), ("", "v1", "ConfigMap")] {
        let _ = schemas.type_errors(group, version, kind, &obj);
        let _ = schemas.unknown_fields(group, version, kind, &obj);
        let mut pruned = obj.clone();
        schemas.prune(group, version, kind, &mut pruned);
    }
}

/// An object rendered as a Table row of the kinds with the most columns, and with a CRD's columns.
pub fn table(data: &[u8]) {
    let (object, columns) = split(data);
    let Some(obj) = tree(object) else { return };
    let now = chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default();
    for (group, plural) in [("", "pods"), ("apps", "deployments"), ("", "services"), ("batch", "cronjobs")] {
        let _ = crate::table::row(group, plural, &obj, crate::table::IncludeObject::Metadata, now);
    }
    if let Some(Value::Array(cols)) = tree(columns) {
        let _ = crate::table::custom_row(&cols, &obj, crate::table::IncludeObject::None, now);
    }
}
