//! Kubernetes `metav1.Status` errors: the one place where every failure becomes a wire response.
//!
//! Modules keep their own `thiserror` types; `From` impls here map each of them to the code, reason and
//! message kube-apiserver would give, so handlers can use `?` and no connection ends without a Status.

use serde_json::{json, Value};

use crate::storage::StoreError;

/// A cause inside `details.causes` (field-level reasons such as `FieldValueInvalid`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// Machine-readable cause type (`FieldValueInvalid`, `FieldManagerConflict`, ...).
    pub reason: String,
    /// Human-readable text.
    pub message: String,
    /// The field path the cause refers to, if any.
    pub field: String,
}

/// An error with Kubernetes semantics: an HTTP code, a `reason` and a message, rendered as `metav1.Status`.
///
/// Boxed so every `Result<_, ApiError>` on the request path stays one pointer wide; the fields are
/// reached through `Deref`.
#[derive(Debug, Clone)]
pub struct ApiError(Box<ErrorFields>);

/// The fields of an `ApiError`.
#[derive(Debug, Clone)]
pub struct ErrorFields {
    /// HTTP status code, equal to `Status.code`.
    pub code: u16,
    /// `Status.reason` (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `details.name`.
    pub name: Option<String>,
    /// `details.group`.
    pub group: Option<String>,
    /// `details.kind` (a resource plural for most reasons, the Kind for `Invalid`).
    pub kind: Option<String>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds`; also sent as a `Retry-After` header.
    pub retry_after: Option<u32>,
}

impl std::ops::Deref for ApiError {
    type Target = ErrorFields;
    fn deref(&self) -> &ErrorFields {
        &self.0
    }
}

impl std::ops::DerefMut for ApiError {
    fn deref_mut(&mut self) -> &mut ErrorFields {
        &mut self.0
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}): {}", self.reason, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

/// Shorthand for results that end as a Status.
pub type ApiResult<T> = Result<T, ApiError>;

/// `<resource>[.<group>]`, the way kube-apiserver names a resource in messages.
pub fn qualified(resource: &str, group: &str) -> String {
    if group.is_empty() {
        resource.to_string()
    } else {
        format!("{resource}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError(Box::new(ErrorFields {
            code,
            reason,
            message: message.into(),
            name: None,
            group: None,
            kind: None,
            causes: Vec::new(),
            retry_after: None,
        }))
    }

    fn with_details(mut self, resource: &str, group: &str, name: &str) -> Self {
        self.kind = Some(resource.to_string());
        if !group.is_empty() {
            self.group = Some(group.to_string());
        }
        if !name.is_empty() {
            self.name = Some(name.to_string());
        }
        self
    }

    /// 400 BadRequest with free text.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden with kube-apiserver's wording already formatted by the caller.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 403 Forbidden about one object, as apimachinery's `NewForbidden`: `<resource>.<group> "<name>" is
    /// forbidden: <why>` (without the name when there is none), with the object in the details.
    pub fn forbidden_object(resource: &str, group: &str, name: &str, why: impl std::fmt::Display) -> Self {
        let subject = if name.is_empty() {
            qualified(resource, group)
        } else {
            format!("{} \"{name}\"", qualified(resource, group))
        };
        Self::new(403, "Forbidden", format!("{subject} is forbidden: {why}")).with_details(resource, group, name)
    }

    /// 404 NotFound for a named object.
    pub fn not_found(resource: &str, group: &str, name: &str) -> Self {
        Self::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(resource, group)))
            .with_details(resource, group, name)
    }

    /// 404 for a path that names nothing we serve.
    pub fn path_not_found() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// 409 AlreadyExists.
    pub fn already_exists(resource: &str, group: &str, name: &str) -> Self {
        Self::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(resource, group)))
            .with_details(resource, group, name)
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <res> "<name>": <why>`.
    pub fn conflict(resource: &str, group: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified(resource, group)),
        )
        .with_details(resource, group, name)
    }

    /// 409 Conflict for a stale resourceVersion.
    pub fn stale(resource: &str, group: &str, name: &str) -> Self {
        Self::conflict(
            resource,
            group,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `<Kind>[.<group>] "<name>" is invalid: <field>: <msg>`; details.kind is the Kind.
    pub fn invalid(kind: &str, group: &str, name: &str, causes: Vec<Cause>) -> Self {
        let joined = causes
            .iter()
            .map(|c| if c.field.is_empty() { c.message.clone() } else { format!("{}: {}", c.field, c.message) })
            .collect::<Vec<_>>();
        let body = if joined.len() == 1 { joined[0].clone() } else { format!("[{}]", joined.join(", ")) };
        let mut e = Self::new(422, "Invalid", format!("{} \"{name}\" is invalid: {body}", qualified(kind, group)))
            .with_details(kind, group, name);
        e.causes = causes;
        e
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(action: &str, resource: &str) -> Self {
        Self::new(405, "MethodNotAllowed", format!("{action} is not supported on resources of kind \"{resource}\""))
    }

    /// 415 UnsupportedMediaType listing the accepted patch types.
    pub fn unsupported_media_type(content_type: &str, accepted: &[&str]) -> Self {
        let _ = content_type;
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 410 Expired.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    /// 413 RequestEntityTooLarge with a message of its own.
    pub fn too_large_because(message: impl Into<String>) -> Self {
        Self::new(413, "RequestEntityTooLarge", message)
    }

    /// 422 Invalid with no kind, name or causes: what kube-apiserver answers for a patch it cannot apply.
    pub fn unprocessable(message: impl Into<String>) -> Self {
        Self::new(422, "Invalid", message)
    }

    /// 500 InternalError. The cause goes to the log, never to the client.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(500, "InternalError", "Internal error occurred: internal error")
    }

    /// 503 ServiceUnavailable (store unreachable), with a retry hint that client-go honours.
    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut e = Self::new(503, "ServiceUnavailable", message);
        e.retry_after = Some(1);
        e
    }

    /// 429 TooManyRequests, with the retry hint that client-go's request retries and reflectors honour.
    pub fn too_many_requests(message: impl Into<String>) -> Self {
        let mut e = Self::new(429, "TooManyRequests", message);
        e.retry_after = Some(1);
        e
    }

    /// 504 Timeout.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::new(504, "Timeout", message)
    }

    /// The `metav1.Status` JSON for this error.
    pub fn to_status(&self) -> Value {
        let mut details = serde_json::Map::new();
        if let Some(n) = &self.name {
            details.insert("name".into(), json!(n));
        }
        if let Some(g) = &self.group {
            details.insert("group".into(), json!(g));
        }
        if let Some(k) = &self.kind {
            details.insert("kind".into(), json!(k));
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| {
                    let mut m = serde_json::Map::new();
                    m.insert("reason".into(), json!(c.reason));
                    m.insert("message".into(), json!(c.message));
                    if !c.field.is_empty() {
                        m.insert("field".into(), json!(c.field));
                    }
                    Value::Object(m)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(r) = self.retry_after {
            details.insert("retryAfterSeconds".into(), json!(r));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty() {
            // A Status a registry answers as it is (an eviction under two budgets) has none.
            status.as_object_mut().expect("built as an object").remove("reason");
        }
        if !details.is_empty() {
            status["details"] = Value::Object(details);
        }
        status
    }
}

/// A field-level cause for `ApiError::invalid`.
pub fn cause(reason: &str, field: &str, message: impl Into<String>) -> Cause {
    Cause { reason: reason.to_string(), message: message.into(), field: field.to_string() }
}

/// A success Status, as returned by deletes.
pub fn success_status(resource: &str, group: &str, name: &str, uid: Option<&str>) -> Value {
    let mut details = json!({"name": name, "kind": resource});
    if !group.is_empty() {
        details["group"] = json!(group);
    }
    if let Some(uid) = uid {
        details["uid"] = json!(uid);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Compacted { requested, compacted } => {
                ApiError::expired(format!("too old resource version: {requested} ({})", compacted + 1))
            }
            StoreError::Unavailable(msg) => ApiError::unavailable(format!("storage is unavailable: {msg}")),
            // kube's words when etcd's answer did not come: 504, and no Retry-After, since the write
            // may be done and client-go would send it again.
            StoreError::OutcomeUnknown(msg) => ApiError::timeout(format!(
                "The write may have completed, but the store did not confirm it ({msg}); read the object before writing it again"
            )),
            // The client's to mend, so not a 500 (as kube-apiserver's is, kubernetes/kubernetes#112152).
            StoreError::TooLarge(msg) => ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("Request entity too large: the object is larger than the store accepts ({msg})"),
            ),
            StoreError::FutureRevision { requested, current } => {
                let mut e = ApiError::timeout(format!("Too large resource version: {requested}, current: {current}"));
                e.causes = vec![cause("ResourceVersionTooLarge", "", "Too large resource version")];
                e.retry_after = Some(1);
                e
            }
            // Only after a create's retries ran out on a namespace that kept changing.
            StoreError::GuardChanged => ApiError::new(
                409,
                "Conflict",
                "the namespace changed while the object was being created; please try again",
            ),
            other => ApiError::internal(other),
        }
    }
}

impl From<crate::selector::SelectorError> for ApiError {
    fn from(e: crate::selector::SelectorError) -> Self {
        ApiError::bad_request(e.to_string())
    }
}

impl From<crate::http::inflight::Refused> for ApiError {
    fn from(e: crate::http::inflight::Refused) -> Self {
        ApiError::too_many_requests(e.to_string())
    }
}

impl From<crate::proto::ProtoError> for ApiError {
    fn from(e: crate::proto::ProtoError) -> Self {
        ApiError::bad_request(format!("failed to decode protobuf body: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_kube_wording() {
        let s = ApiError::not_found("widgets", "example.com", "nope").to_status();
        assert_eq!(s["message"], "widgets.example.com \"nope\" not found");
        assert_eq!(s["details"]["kind"], "widgets");
        assert_eq!(s["details"]["group"], "example.com");
        assert_eq!(s["code"], 404);
    }

    #[test]
    fn conflict_message_for_core_resource_has_no_group() {
        let s = ApiError::stale("configmaps", "", "cm2").to_status();
        assert_eq!(
            s["message"],
            "Operation cannot be fulfilled on configmaps \"cm2\": the object has been modified; please apply your changes to the latest version and try again"
        );
        assert!(s["details"].get("group").is_none());
    }

    #[test]
    fn invalid_uses_kind_and_causes() {
        let e = ApiError::invalid(
            "ConfigMap",
            "",
            "Bad_Name",
            vec![cause("FieldValueInvalid", "metadata.name", "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'")],
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert!(s["message"]
            .as_str()
            .unwrap()
            .starts_with("ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value"));
        assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid");
    }
}
