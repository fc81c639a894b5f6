//! Object metadata rules shared by every resource: name and label validation, server-set fields,
//! and small accessors over unstructured (`serde_json::Value`) objects.

use rand::Rng;
use serde_json::{Map, Value};

use crate::status::{cause, Cause};

/// Longest DNS-1123 label.
const LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain.
const SUBDOMAIN_MAX: usize = 253;

fn is_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// DNS-1123 label (namespaces, services, logical clusters), with kube-apiserver's message.
pub fn validate_dns1123_label(s: &str) -> Result<(), String> {
    dns1123_label_errors(s).into_iter().next().map_or(Ok(()), Err)
}

/// Every problem of a DNS-1123 label, each its own message as apimachinery's `IsDNS1123Label` gives
/// them: its length, then its characters.
pub fn dns1123_label_errors(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let mut errs = Vec::new();
    if b.len() > LABEL_MAX {
        errs.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    let shaped =
        !b.is_empty() && is_alnum(b[0]) && is_alnum(b[b.len() - 1]) && b.iter().all(|&c| is_alnum(c) || c == b'-');
    if !shaped {
        // kube 1.33: a valid subdomain fails as a label for its dots alone, and says so.
        errs.push(if subdomain_shape(s) {
            "must not contain dots".to_string()
        } else {
            const MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
            regex_error(MSG, "[a-z0-9]([-a-z0-9]*[a-z0-9])?", &["my-name", "123-abc"])
        });
    }
    errs
}

/// Dot-separated DNS-1123 labels, whatever the length.
fn subdomain_shape(s: &str) -> bool {
    !s.is_empty()
        && s.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty() && is_alnum(b[0]) && is_alnum(b[b.len() - 1]) && b.iter().all(|&c| is_alnum(c) || c == b'-')
        })
}

/// DNS-1123 subdomain (most object names), with kube-apiserver's message.
pub fn validate_dns1123_subdomain(s: &str) -> Result<(), String> {
    dns1123_subdomain_errors(s).into_iter().next().map_or(Ok(()), Err)
}

/// Every problem of a DNS-1123 subdomain, each its own message as apimachinery's
/// `IsDNS1123Subdomain` gives them: its length, then its characters.
pub fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > SUBDOMAIN_MAX {
        errs.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !subdomain_shape(s) {
        errs.push(regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"]));
    }
    errs
}

/// Names that path segments forbid for every resource (`path segment name may not be ...`).
pub fn validate_path_segment(s: &str) -> Result<(), String> {
    path_segment_errors(s).into_iter().next().map_or(Ok(()), Err)
}

/// Every problem of a path segment name, as apimachinery's `IsValidPathSegmentName` gives them: a
/// name that is `.` or `..`, else each forbidden character it holds.
pub fn path_segment_errors(s: &str) -> Vec<String> {
    if s == "." || s == ".." {
        return vec![format!("may not be '{s}'")];
    }
    ["/", "%"].iter().filter(|bad| s.contains(**bad)).map(|bad| format!("may not contain '{bad}'")).collect()
}

/// Which name rule a resource uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (configmaps, secrets, deployments, ...).
    Subdomain,
    /// DNS-1123 label (namespaces).
    Label,
    /// DNS-1035 label: a letter first (services, as kube's `ValidateServiceName`).
    Label1035,
    /// Any path segment (RBAC objects allow `system:foo`).
    PathSegment,
}

impl NameRule {
    /// Check a name against the rule: every problem, each its own message, as kube's name
    /// functions give them (`metadata.name` gets a cause for each).
    pub fn errors(self, name: &str) -> Vec<String> {
        match self {
            NameRule::Subdomain => dns1123_subdomain_errors(name),
            NameRule::Label => dns1123_label_errors(name),
            NameRule::Label1035 => dns1035_label_errors(name),
            NameRule::PathSegment if name.is_empty() => vec!["name is required".into()],
            NameRule::PathSegment => path_segment_errors(name),
        }
    }
}

/// apimachinery's `RegexError` text (with Go's double space before "or").
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let shown: String = examples.iter().map(|e| format!("'{e}', ")).collect::<Vec<_>>().join(" or ");
    if examples.is_empty() {
        format!("{msg} (regex used for validation is '{fmt}')")
    } else {
        format!("{msg} (e.g. {shown}regex used for validation is '{fmt}')")
    }
}

const QNAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QNAME_MSG: &str =
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const QNAME_EXAMPLES: &[&str] = &["MyName", "my.name", "123-abc"];
const SUBDOMAIN_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// A qualified name's part: alphanumerics, `-`, `_` and `.`, starting and ending alphanumeric.
fn qualified_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|&c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.')
}

/// What is wrong with a label or annotation key, `[prefix/]name` (apimachinery's `IsQualifiedName`,
/// a message per rule broken; kube reports each as its own error).
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let name = match key.split('/').collect::<Vec<_>>()[..] {
        [name] => name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                if prefix.len() > SUBDOMAIN_MAX {
                    errs.push(format!("prefix part must be no more than {SUBDOMAIN_MAX} characters"));
                }
                if !subdomain_shape(prefix) {
                    errs.push(format!("prefix part {}", regex_error(SUBDOMAIN_MSG, SUBDOMAIN_FMT, &["example.com"])));
                }
            }
            name
        }
        _ => {
            let why = regex_error(QNAME_MSG, QNAME_FMT, QNAME_EXAMPLES);
            return vec![format!(
                "a qualified name {why} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_MAX {
        errs.push(format!("name part must be no more than {LABEL_MAX} characters"));
    }
    if !qualified_part_ok(name) {
        errs.push(format!("name part {}", regex_error(QNAME_MSG, QNAME_FMT, QNAME_EXAMPLES)));
    }
    errs
}

/// About how many bytes `v` takes as JSON, if no more than `budget`; `None` as soon as it is more, so
/// that sizing a large value costs no more than the budget.
pub fn json_size_within(v: &Value, budget: usize) -> Option<usize> {
    let mut total = 0usize;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        total += match v {
            Value::Null | Value::Bool(_) => 5,
            Value::Number(_) => 8,
            Value::String(s) => s.len() + 2,
            Value::Array(a) => {
                stack.extend(a.iter());
                a.len() + 2
            }
            Value::Object(m) => {
                for (k, v) in m {
                    total += k.len() + 4;
                    stack.push(v);
                }
                2
            }
        };
        if total > budget {
            return None;
        }
    }
    Some(total)
}

/// The deepest nesting of objects and arrays a stored object may have: what `serde_json` reads back
/// (its recursion limit), so every object written can be read. A request body deeper than that fails
/// to parse; a patch or defaults could build one.
pub const MAX_NESTING: usize = 127;

/// How deeply `v` nests objects and arrays (a scalar is 0, `{}` is 1), counted no further than just
/// past `max`, without recursion: a value too deep for the stack is what this guards against.
pub fn nesting(v: &Value, max: usize) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Array(a) => Box::new(a.iter()),
            Value::Object(m) => Box::new(m.values()),
            _ => continue,
        };
        deepest = deepest.max(depth);
        if deepest > max {
            return deepest;
        }
        stack.extend(children.filter(|c| c.is_array() || c.is_object()).map(|c| (c, depth + 1)));
    }
    deepest
}

/// Go's `%q` of a string (`strconv.Quote`), as kube shows a refused value: quotes and backslashes
/// escaped, C's short escapes for the control characters that have one, `\xNN` for the other ASCII
/// ones, `\uNNNN` for other control characters; everything else, Unicode included, as it is.
pub fn go_quote(s: &str) -> String {
    use std::fmt::Write;
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if c.is_ascii_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// What is wrong with a DNS-1035 label (apimachinery's `IsDNS1035Label`: a letter first).
pub fn dns1035_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > LABEL_MAX {
        errs.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    let b = s.as_bytes();
    let ok = !b.is_empty()
        && b[0].is_ascii_lowercase()
        && is_alnum(b[b.len() - 1])
        && b.iter().all(|&c| is_alnum(c) || c == b'-');
    if !ok {
        const MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
        errs.push(regex_error(MSG, "[a-z]([-a-z0-9]*[a-z0-9])?", &["my-name", "abc-123"]));
    }
    errs
}

/// What is wrong with a label value (apimachinery's `IsValidLabelValue`): empty, or a qualified
/// name's part of at most 63 characters.
pub fn label_value_errors(v: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if v.len() > LABEL_MAX {
        errs.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !v.is_empty() && !qualified_part_ok(v) {
        const MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
        const FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
        errs.push(regex_error(MSG, FMT, &["MyValue", "my_value", "12345"]));
    }
    errs
}

/// Labels as kube's `ValidateLabels`: each key's and each value's errors at `at` (the map's own path).
pub fn label_errors(labels: &Map<String, Value>, at: &str, out: &mut Vec<Cause>) {
    // Each message is some hundred bytes, whatever the label's size: a map of many bad labels must
    // not make an answer many times the body.
    const MAX_CAUSES: usize = 256;
    for (k, v) in labels {
        if out.len() >= MAX_CAUSES {
            return;
        }
        for e in qualified_name_errors(k) {
            out.push(cause("FieldValueInvalid", at, format!("Invalid value: {k:?}: {e}")));
        }
        match v.as_str() {
            Some(s) => {
                for e in label_value_errors(s) {
                    out.push(cause("FieldValueInvalid", at, format!("Invalid value: {s:?}: {e}")));
                }
            }
            None => out.push(cause("FieldValueInvalid", at, format!("Invalid value: {v}: must be a string"))),
        }
    }
}

/// Total size limit of annotations (256 KiB), as kube-apiserver.
const ANNOTATIONS_MAX: usize = 256 * 1024;

/// Validate `metadata.labels` and `metadata.annotations`, returning field causes.
pub fn validate_labels_annotations(meta: &Map<String, Value>) -> Vec<Cause> {
    labels_annotations_errors(meta, "metadata.labels", "metadata.annotations")
}

/// The labels' and annotations' errors of an object's metadata, or of a pod template's (which kube
/// names `spec.template.labels` and `spec.template.annotations`), at the paths given.
pub fn labels_annotations_errors(meta: &Map<String, Value>, labels_at: &str, annotations_at: &str) -> Vec<Cause> {
    // As `label_errors`: a map of many bad keys must not make an answer many times the body.
    const MAX_CAUSES: usize = 256;
    let mut out = Vec::new();
    match meta.get("labels") {
        Some(Value::Object(labels)) => label_errors(labels, labels_at, &mut out),
        None | Some(Value::Null) => {}
        Some(_) => out.push(cause("FieldValueInvalid", labels_at, "must be an object of strings")),
    }
    match meta.get("annotations") {
        Some(Value::Object(ann)) => {
            let mut total = 0;
            for (k, v) in ann {
                for e in qualified_name_errors(k) {
                    if out.len() < MAX_CAUSES {
                        out.push(cause("FieldValueInvalid", annotations_at, format!("Invalid value: {k:?}: {e}")));
                    }
                }
                match v.as_str() {
                    Some(s) => total += k.len() + s.len(),
                    None if out.len() < MAX_CAUSES => out.push(cause(
                        "FieldValueInvalid",
                        annotations_at,
                        format!("Invalid value: {v}: must be a string"),
                    )),
                    None => {}
                }
            }
            if total > ANNOTATIONS_MAX {
                out.push(cause(
                    "FieldValueTooLong",
                    annotations_at,
                    format!("Too long: must have at most {ANNOTATIONS_MAX} bytes"),
                ));
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => out.push(cause("FieldValueInvalid", annotations_at, "must be an object of strings")),
    }
    out
}

/// The name generator alphabet of `apiserver/pkg/storage/names` (no vowels, no confusable digits).
const GENERATE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `generateName` + 5 random characters, the base cut to 58 characters.
pub fn generate_name(base: &str) -> String {
    let base: String = base.chars().take(58).collect();
    let mut rng = rand::rng();
    let suffix: String =
        (0..5).map(|_| GENERATE_ALPHABET[rng.random_range(0..GENERATE_ALPHABET.len())] as char).collect();
    format!("{base}{suffix}")
}

/// RFC 3339 timestamp with second precision, as `metav1.Time` serialises.
pub fn now_rfc3339() -> String {
    // Not `format("%Y-...")`: that parses its pattern on every call, about 1% of a create's CPU.
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `metadata` of an object, or `None` if it is missing or not an object.
pub fn metadata(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata").and_then(Value::as_object)
}

/// Mutable `metadata`, created if missing.
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let root = obj.as_object_mut().expect("objects are JSON objects");
    let entry = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    entry.as_object_mut().expect("just made an object")
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    metadata(obj).and_then(|m| m.get(field)).and_then(Value::as_str)
}

/// `metadata.labels` as a map, if present.
pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    metadata(obj).and_then(|m| m.get("labels")).and_then(Value::as_object)
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Everything except metadata and status: a change here bumps `metadata.generation`.
pub fn spec_equal(a: &Value, b: &Value) -> bool {
    let strip = |v: &Value| -> Value {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("metadata");
            m.remove("status");
            m.remove("apiVersion");
            m.remove("kind");
        }
        v
    };
    strip(a) == strip(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_rules() {
        assert!(validate_dns1123_label("team-a").is_ok());
        assert!(validate_dns1123_label("Team").is_err());
        assert!(validate_dns1123_label(&"a".repeat(64)).is_err());
        // As kube 1.33 words it: a valid subdomain is refused for its dots.
        assert_eq!(validate_dns1123_label("team.a"), Err("must not contain dots".to_string()));
        // Services' names are DNS-1035 labels (kube's `ValidateServiceName`): a letter first.
        assert!(NameRule::Label1035.errors("web-1").is_empty());
        assert!(NameRule::Label1035.errors("1web")[0].starts_with("a DNS-1035 label"));
        assert!(NameRule::Label.errors("1web").is_empty());
        // Too long and badly made: two problems, each its own message, as kube reports them.
        let long_bad = format!("A{}", "a".repeat(300));
        for rule in [NameRule::Label, NameRule::Subdomain] {
            let errs = rule.errors(&long_bad);
            assert_eq!(errs.len(), 2, "{rule:?}: {errs:?}");
            assert!(errs[0].starts_with("must be no more than") && errs[1].starts_with("a lowercase RFC 1123"));
        }
        assert_eq!(NameRule::Subdomain.errors(&"a".repeat(254)), ["must be no more than 253 characters"]);
        assert_eq!(NameRule::PathSegment.errors(""), ["name is required"]);
        assert_eq!(NameRule::PathSegment.errors("a/b%"), ["may not contain '/'", "may not contain '%'"]);
        assert_eq!(NameRule::PathSegment.errors(".."), ["may not be '..'"]);
        // Go's `%q`, as kube's messages quote a value.
        assert_eq!(go_quote("a\"b\\c\u{7}\u{1b}\t\u{85}é"), r#""a\"b\\c\a\x1b\t\u0085é""#);
        assert!(validate_dns1123_label("team..a").unwrap_err().starts_with("a lowercase RFC 1123 label"));
        assert!(validate_dns1123_subdomain("a.b-c.d").is_ok());
        assert!(validate_dns1123_subdomain("a..b").is_err());
        assert!(validate_dns1123_subdomain("a_b").is_err());
    }

    #[test]
    fn label_keys_and_values() {
        assert!(qualified_name_errors("app.kubernetes.io/name").is_empty());
        assert_eq!(qualified_name_errors("/name"), ["prefix part must be non-empty"]);
        assert!(qualified_name_errors("a/b/c")[0].starts_with("a qualified name must consist"));
        // Each broken rule is its own message, as kube reports them.
        let long_and_bad = format!("{}-", "x".repeat(64));
        assert_eq!(qualified_name_errors(&long_and_bad).len(), 2);
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("v1.2_x").is_empty());
        assert_eq!(label_value_errors("-x").len(), 1);
        assert_eq!(label_value_errors(&format!("{}-", "x".repeat(64))).len(), 2);
    }

    #[test]
    fn generated_names_have_five_suffix_chars() {
        let n = generate_name("web-");
        assert_eq!(n.len(), 9);
        assert!(n[4..].bytes().all(|c| GENERATE_ALPHABET.contains(&c)));
        assert_eq!(generate_name(&"x".repeat(80)).len(), 63);
    }

    #[test]
    fn spec_equality_ignores_metadata_and_status() {
        let a = serde_json::json!({"metadata":{"labels":{"a":"b"}},"spec":{"r":1},"status":{"x":1}});
        let b = serde_json::json!({"metadata":{},"spec":{"r":1},"status":{"x":2}});
        assert!(spec_equal(&a, &b));
        let c = serde_json::json!({"spec":{"r":2}});
        assert!(!spec_equal(&a, &c));
    }
}
