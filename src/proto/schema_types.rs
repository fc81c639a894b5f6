//! Shapes of the generated protobuf field table (`schema.rs`) and lookups into it.

use super::schema::MESSAGES;

/// Go `omitempty`: a zero scalar or an empty list or map is left out of the JSON.
pub(super) const OMITEMPTY: u8 = 1;
/// The Go field is a pointer, so presence on the wire (even of a zero) is meaningful.
pub(super) const POINTER: u8 = 2;
/// Go `json:",inline"`: the sub-message's fields belong to the enclosing JSON object.
pub(super) const INLINE: u8 = 4;

/// How a message's JSON form is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// A JSON object of its fields.
    Object,
    /// `metav1.Time`: RFC 3339 seconds, or null when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with microseconds, or null when zero.
    MicroTime,
    /// `metav1.Duration`: Go duration string.
    Duration,
    /// `intstr.IntOrString`: a number or a string.
    IntOrString,
    /// `resource.Quantity`: its canonical string.
    Quantity,
    /// Raw JSON bytes in field 1 (RawExtension, FieldsV1, apiextensions JSON).
    RawJson,
    /// Go `type X []string`, carried as a message with repeated field 1.
    Items,
    /// apiextensions JSONSchemaPropsOrArray.
    SchemaOrArray,
    /// apiextensions JSONSchemaPropsOrBool.
    SchemaOrBool,
    /// apiextensions JSONSchemaPropsOrStringArray.
    SchemaOrStringArray,
}

/// Proto scalar type or message reference of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Str,
    Bytes,
    Bool,
    I32,
    I64,
    F64,
    /// Index into `MESSAGES`.
    Msg(u16),
}

/// Cardinality of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Rep {
    /// Singular.
    S,
    /// Repeated.
    L,
    /// `map<string, kind>`.
    M,
}

/// One field of a message.
#[derive(Debug)]
pub(super) struct Field {
    pub tag: u32,
    pub json: &'static str,
    pub kind: Kind,
    pub rep: Rep,
    pub flags: u8,
}

impl Field {
    pub(super) const fn new(tag: u32, json: &'static str, kind: Kind, rep: Rep, flags: u8) -> Self {
        Field { tag, json, kind, rep, flags }
    }

    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// One message: full proto name, JSON shape and fields in Go declaration order.
#[derive(Debug)]
pub(super) struct Message {
    pub name: &'static str,
    pub shape: Shape,
    pub fields: &'static [Field],
}

/// Index of the message with this full proto name (e.g. `k8s.io.api.core.v1.Pod`).
pub(super) fn find(name: &str) -> Option<u16> {
    MESSAGES.binary_search_by(|m| m.name.cmp(name)).ok().and_then(|i| u16::try_from(i).ok())
}

/// The message at `index`; indices come from the table itself, so they are always valid.
pub(super) fn message(index: u16) -> &'static Message {
    &MESSAGES[usize::from(index)]
}

/// Proto package holding the types of a Kubernetes `apiVersion`.
pub(super) fn package_for(api_version: &str) -> Option<String> {
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    };
    if version.is_empty() {
        return None;
    }
    // A custom resource's group may begin with a built-in's first label (`apps.kruise.io`): only kube's
    // own groups name its packages, those under `k8s.io` and the four older ones without it.
    if !(group.is_empty() || group.ends_with(".k8s.io") || matches!(group, "apps" | "batch" | "autoscaling" | "policy"))
    {
        return None;
    }
    let package = match group {
        "" => format!("k8s.io.api.core.{version}"),
        "meta.k8s.io" => format!("k8s.io.apimachinery.pkg.apis.meta.{version}"),
        "apiextensions.k8s.io" => {
            format!("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.{version}")
        }
        "internal.apiserver.k8s.io" => format!("k8s.io.api.apiserverinternal.{version}"),
        // Every other built-in group's proto package is named after its first DNS label
        // (rbac.authorization.k8s.io -> rbac, flowcontrol.apiserver.k8s.io -> flowcontrol).
        _ => {
            let label = group.split('.').next().unwrap_or(group);
            format!("k8s.io.api.{label}.{version}")
        }
    };
    Some(package)
}
