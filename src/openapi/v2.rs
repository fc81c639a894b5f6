//! `/openapi/v2`: the Swagger 2.0 document kubectl falls back to when OpenAPI v3 cannot answer.
//!
//! kubectl asks the v3 documents whether each kind in a file supports server-side field validation.
//! A file of `kind: List` (what `kubectl get -o yaml` writes) is no resource, so kubectl validates it on
//! the client instead, against `/openapi/v2` in gnostic's protobuf; a 404 there failed every
//! `kubectl create -f` and `apply -f` of a List. The document has no definitions on purpose: kubectl
//! then checks nothing on the client and sends each item with `fieldValidation=Strict`, and kgate's
//! schema checks (`validate.rs`, the same that answer every single-object request) do the validating.

use prost::Message;
use serde_json::json;

/// The media type of the protobuf form, as kube-apiserver labels it. kubectl asks for the older spelling
/// with `@v1.0`, but Go's MIME parser rejects `@` in a response's Content-Type, so answers use the dots.
pub const PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The fields of gnostic's `openapi.v2.Document` kgate fills (tags from `openapiv2/OpenAPIv2.proto`).
#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    /// Present and empty: Swagger 2.0 requires `paths`.
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {}

/// The document as `(content type, body)`: protobuf when `accept` names it in either spelling (kubectl
/// always does), else the same document in JSON.
pub fn document(accept: Option<&str>, version: &str) -> (&'static str, Vec<u8>) {
    if accept.is_some_and(|a| a.contains("com.github.proto-openapi.spec.v2")) {
        let doc = Document {
            swagger: "2.0".into(),
            info: Some(Info { title: "Kubernetes".into(), version: version.into() }),
            paths: Some(Paths {}),
        };
        (PROTOBUF, doc.encode_to_vec())
    } else {
        let doc = json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": version}, "paths": {}});
        ("application/json", serde_json::to_vec(&doc).expect("JSON serialises"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_when_asked_for_it_json_otherwise() {
        let kubectl = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
        let (ct, body) = document(Some(kubectl), "v1.33.0");
        assert_eq!(ct, PROTOBUF);
        let doc = Document::decode(body.as_slice()).unwrap();
        assert_eq!(doc.swagger, "2.0");
        assert_eq!(doc.info.unwrap().version, "v1.33.0");
        assert!(doc.paths.is_some());
        let (ct, body) = document(Some("application/json"), "v1.33.0");
        assert_eq!(ct, "application/json");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["swagger"], "2.0");
    }
}
