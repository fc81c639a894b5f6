//! Label and field selectors as kube-apiserver parses and evaluates them (`?labelSelector=`, `?fieldSelector=`).
//!
//! The grammar, the matching rules and the error texts follow k8s.io/apimachinery `pkg/labels` and
//! `pkg/fields`, because kubectl and other clients show the server's message verbatim.

pub mod object;

use serde_json::{Map, Value};

/// A parse error; its text is what kube-apiserver returns in a 400 BadRequest.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum SelectorError {
    /// A label selector requirement could not be parsed or validated.
    #[error("unable to parse requirement: {0}")]
    Requirement(String),
    /// A label selector was structurally wrong between requirements.
    #[error("{0}")]
    Syntax(String),
    /// A field selector term had no operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    FieldTerm {
        /// The whole selector as given.
        selector: String,
        /// The offending comma-separated term.
        term: String,
    },
    /// A field selector value used an unknown backslash escape.
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscape(String),
    /// A field selector value contained a bare `,` or `=`.
    #[error("invalid field selector: unescaped character in value: {0}")]
    UnescapedRune(char),
}

/// Label selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelOp {
    /// `k=v`, `k==v`, `k in (..)`
    In,
    /// `k!=v`, `k notin (..)`
    NotIn,
    /// `k`
    Exists,
    /// `!k`
    DoesNotExist,
    /// `k>n` (integer comparison)
    GreaterThan,
    /// `k<n` (integer comparison)
    LessThan,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
pub struct Requirement {
    /// Label key.
    pub key: String,
    /// Operator.
    pub op: LabelOp,
    /// Values (sorted, deduplicated); empty for Exists/DoesNotExist.
    pub values: Vec<String>,
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let got = labels.and_then(|l| l.get(&self.key)).map(label_str);
        match self.op {
            // Sorted at parse time: a request's list of thousands of values costs a lookup per object,
            // not a scan.
            LabelOp::In => got.is_some_and(|v| self.values.binary_search(&v).is_ok()),
            LabelOp::NotIn => got.is_none_or(|v| self.values.binary_search(&v).is_err()),
            LabelOp::Exists => got.is_some(),
            LabelOp::DoesNotExist => got.is_none(),
            LabelOp::GreaterThan | LabelOp::LessThan => {
                let (Some(v), Some(want)) = (got, self.values.first()) else {
                    return false;
                };
                let (Ok(have), Ok(want)) = (v.parse::<i64>(), want.parse::<i64>()) else {
                    return false;
                };
                if self.op == LabelOp::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

fn label_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A parsed label selector: requirements ANDed together. Empty matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LabelSelector {
    /// Requirements, sorted by key as apimachinery does.
    pub requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    End,
    ClosePar,
    Comma,
    Not,
    DoubleEquals,
    Equals,
    Greater,
    Ident(String),
    In,
    Less,
    NotEquals,
    NotIn,
    OpenPar,
}

impl Tok {
    /// The literal the Go lexer keeps for this token, used in error messages.
    fn literal(&self) -> &str {
        match self {
            Tok::End => "",
            Tok::ClosePar => ")",
            Tok::Comma => ",",
            Tok::Not => "!",
            Tok::DoubleEquals => "==",
            Tok::Equals => "=",
            Tok::Greater => ">",
            Tok::Ident(s) => s,
            Tok::In => "in",
            Tok::Less => "<",
            Tok::NotEquals => "!=",
            Tok::NotIn => "notin",
            Tok::OpenPar => "(",
        }
    }

    /// In value position `in`/`notin` are ordinary identifiers (`x in (in)`).
    fn as_value(&self) -> Tok {
        match self {
            Tok::In => Tok::Ident("in".into()),
            Tok::NotIn => Tok::Ident("notin".into()),
            t => t.clone(),
        }
    }
}

fn is_special(c: u8) -> bool {
    matches!(c, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

fn is_ws(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

fn symbol_token(s: &str) -> Option<Tok> {
    Some(match s {
        ")" => Tok::ClosePar,
        "," => Tok::Comma,
        "!" => Tok::Not,
        "==" => Tok::DoubleEquals,
        "=" => Tok::Equals,
        ">" => Tok::Greater,
        "<" => Tok::Less,
        "!=" => Tok::NotEquals,
        "(" => Tok::OpenPar,
        _ => return None,
    })
}

fn lex(s: &str) -> Vec<Tok> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    loop {
        while i < b.len() && is_ws(b[i]) {
            i += 1;
        }
        if i >= b.len() {
            out.push(Tok::End);
            return out;
        }
        if is_special(b[i]) {
            // Longest run of specials that still forms a known operator, like the Go lexer.
            let start = i;
            let mut best: Option<(Tok, usize)> = None;
            let mut j = i;
            while j < b.len() && is_special(b[j]) {
                j += 1;
                match symbol_token(&s[start..j]) {
                    Some(t) => best = Some((t, j)),
                    None if best.is_some() => break,
                    None => {}
                }
            }
            match best {
                Some((t, end)) => {
                    out.push(t);
                    i = end;
                }
                None => {
                    // Unreachable with the current symbol set, kept so odd input never loops.
                    out.push(Tok::Ident(s[start..j].to_string()));
                    i = j;
                }
            }
        } else {
            let start = i;
            while i < b.len() && !is_special(b[i]) && !is_ws(b[i]) {
                i += 1;
            }
            let word = &s[start..i];
            out.push(match word {
                "in" => Tok::In,
                "notin" => Tok::NotIn,
                w => Tok::Ident(w.to_string()),
            });
        }
    }
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Tok {
        self.toks.get(self.pos).cloned().unwrap_or(Tok::End)
    }
    fn peek_value(&self) -> Tok {
        self.peek().as_value()
    }
    fn next_raw(&mut self) -> Tok {
        let t = self.peek();
        self.pos += 1;
        t
    }
    fn next_value(&mut self) -> Tok {
        self.next_raw().as_value()
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let mut reqs = Vec::new();
        loop {
            let t = self.peek_value();
            match t {
                Tok::Ident(_) | Tok::Not => {
                    let r = self.requirement().map_err(SelectorError::Requirement)?;
                    reqs.push(r);
                    let t = self.next_value();
                    match t {
                        Tok::End => return Ok(reqs),
                        Tok::Comma => {
                            let t2 = self.peek_value();
                            if !matches!(t2, Tok::Ident(_) | Tok::Not) {
                                return Err(SelectorError::Syntax(format!(
                                    "found '{}', expected: identifier after ','",
                                    t2.literal()
                                )));
                            }
                        }
                        other => {
                            return Err(SelectorError::Syntax(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                other.literal()
                            )));
                        }
                    }
                }
                Tok::End => return Ok(reqs),
                other => {
                    return Err(SelectorError::Syntax(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        other.literal()
                    )));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut t = self.next_value();
        let mut negated = false;
        if t == Tok::Not {
            negated = true;
            t = self.next_value();
        }
        let Tok::Ident(key) = t else {
            return Err(format!("found '{}', expected: identifier", t.literal()));
        };
        if let Some(e) = validate_key(&key) {
            return Err(format!("<nil>: Invalid value: {}: {e}", crate::meta::go_quote(&key)));
        }
        let after = self.peek_value();
        if negated || matches!(after, Tok::End | Tok::Comma) {
            let op = if negated { LabelOp::DoesNotExist } else { LabelOp::Exists };
            // `!k=v` falls through to the caller, which reports the stray operator.
            return Ok(Requirement { key, op, values: Vec::new() });
        }
        let op_tok = self.next_raw();
        let (op, set) = match op_tok {
            Tok::In => (LabelOp::In, true),
            Tok::NotIn => (LabelOp::NotIn, true),
            Tok::Equals | Tok::DoubleEquals => (LabelOp::In, false),
            Tok::NotEquals => (LabelOp::NotIn, false),
            Tok::Greater => (LabelOp::GreaterThan, false),
            Tok::Less => (LabelOp::LessThan, false),
            other => {
                return Err(format!("found '{}', expected: in, notin, =, ==, !=, gt, lt", other.literal()));
            }
        };
        let mut values = if set { self.values()? } else { self.exact_value()? };
        values.sort();
        values.dedup();
        let mut errs = Vec::new();
        if matches!(op, LabelOp::GreaterThan | LabelOp::LessThan) {
            for (i, v) in values.iter().enumerate() {
                if v.parse::<i64>().is_err() {
                    errs.push(format!(
                        "values[{i}]: Invalid value: {}: for 'Gt', 'Lt' operators, the value must be an integer",
                        crate::meta::go_quote(v)
                    ));
                }
            }
        }
        for (i, v) in values.iter().enumerate() {
            if let Some(e) = validate_value(v) {
                errs.push(format!("values[{i}][{key}]: Invalid value: {}: {e}", crate::meta::go_quote(v)));
            }
        }
        match errs.len() {
            0 => Ok(Requirement { key, op, values }),
            1 => Err(errs.remove(0)),
            // Go's aggregate error prints several errors as a bracketed list.
            _ => Err(format!("[{}]", errs.join(", "))),
        }
    }

    fn values(&mut self) -> Result<Vec<String>, String> {
        let t = self.next_value();
        if t != Tok::OpenPar {
            return Err(format!("found '{}' expected: '('", t.literal()));
        }
        let t = self.peek_value();
        match t {
            Tok::Ident(_) | Tok::Comma => {
                let s = self.ident_list()?;
                let t2 = self.next_value();
                if t2 != Tok::ClosePar {
                    return Err(format!("found '{}', expected: ')'", t.literal()));
                }
                Ok(s)
            }
            // `k in ()` is accepted and means the single empty value.
            Tok::ClosePar => {
                self.next_value();
                Ok(vec![String::new()])
            }
            other => Err(format!("found '{}', expected: ',', ')' or identifier", other.literal())),
        }
    }

    fn ident_list(&mut self) -> Result<Vec<String>, String> {
        let mut s: Vec<String> = Vec::new();
        loop {
            let t = self.next_value();
            match t {
                Tok::Ident(v) => {
                    s.push(v);
                    let t2 = self.peek_value();
                    match t2 {
                        Tok::Comma => continue,
                        Tok::ClosePar => return Ok(s),
                        other => {
                            return Err(format!("found '{}', expected: ',' or ')'", other.literal()));
                        }
                    }
                }
                // Empty list members (`(,a)`, `(a,)`, `(a,,b)`) stand for the empty value.
                Tok::Comma => {
                    if s.is_empty() {
                        s.push(String::new());
                    }
                    let t2 = self.peek_value();
                    if t2 == Tok::ClosePar {
                        s.push(String::new());
                        return Ok(s);
                    }
                    if t2 == Tok::Comma {
                        self.next_value();
                        s.push(String::new());
                    }
                }
                other => {
                    return Err(format!("found '{}', expected: ',', or identifier", other.literal()));
                }
            }
        }
    }

    fn exact_value(&mut self) -> Result<Vec<String>, String> {
        let t = self.peek_value();
        if matches!(t, Tok::End | Tok::Comma) {
            return Ok(vec![String::new()]);
        }
        match self.next_value() {
            Tok::Ident(v) => Ok(vec![v]),
            other => Err(format!("found '{}', expected: identifier", other.literal())),
        }
    }
}

/// Validation errors for a label key (apimachinery IsQualifiedName), joined with "; " as the
/// selector parser joins them.
pub fn validate_key(key: &str) -> Option<String> {
    let errs = crate::meta::qualified_name_errors(key);
    (!errs.is_empty()).then(|| errs.join("; "))
}

/// Validation errors for a label value (apimachinery IsValidLabelValue), joined with "; ".
pub fn validate_value(v: &str) -> Option<String> {
    let errs = crate::meta::label_value_errors(v);
    (!errs.is_empty()).then(|| errs.join("; "))
}

impl LabelSelector {
    /// Parses `?labelSelector=` text; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut p = Parser { toks: lex(s), pos: 0 };
        let mut requirements = p.parse()?;
        // Stable sort by key, as apimachinery does for a deterministic String().
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { requirements })
    }

    /// Whether an object's `metadata.labels` satisfies every requirement.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

/// Field selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOp {
    /// `=` or `==`
    Equals,
    /// `!=`
    NotEquals,
}

/// One `field<op>value` term of a field selector.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldTerm {
    /// Field path, e.g. `metadata.name` (not trimmed, as in Go).
    pub field: String,
    /// Operator.
    pub op: FieldOp,
    /// Unescaped value.
    pub value: String,
}

/// A parsed field selector: terms ANDed together. Empty matches everything.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FieldSelector {
    /// Terms, in the sorted order apimachinery keeps them.
    pub terms: Vec<FieldTerm>,
}

/// Splits on commas that are not backslash-escaped, keeping the escapes.
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in s.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            out.push(&s[start..i]);
            start = i + 1;
        }
    }
    out.push(&s[start..]);
    out
}

fn split_term(term: &str) -> Option<(&str, FieldOp, &str)> {
    // The first operator occurrence wins; `!=` and `==` are tried before `=` at each position.
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        if let Some(r) = rest.strip_prefix("!=") {
            return Some((&term[..i], FieldOp::NotEquals, r));
        }
        if let Some(r) = rest.strip_prefix("==") {
            return Some((&term[..i], FieldOp::Equals, r));
        }
        if let Some(r) = rest.strip_prefix('=') {
            return Some((&term[..i], FieldOp::Equals, r));
        }
    }
    None
}

fn unescape_value(s: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(s.len());
    let mut in_slash = false;
    for c in s.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => return Err(SelectorError::InvalidEscape(format!("\\{other}"))),
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            ',' | '=' => return Err(SelectorError::UnescapedRune(c)),
            c => out.push(c),
        }
    }
    if in_slash {
        return Err(SelectorError::InvalidEscape("\\".into()));
    }
    Ok(out)
}

impl FieldSelector {
    /// Parses `?fieldSelector=` text; the empty string selects everything.
    pub fn parse(s: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, op, raw)) = split_term(part) else {
                return Err(SelectorError::FieldTerm { selector: s.to_string(), term: part.to_string() });
            };
            terms.push(FieldTerm { field: field.to_string(), op, value: unescape_value(raw)? });
        }
        Ok(FieldSelector { terms })
    }

    /// True when the selector selects everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The field paths used, so the caller can reject unsupported ones with
    /// `field label not supported: <field>`.
    pub fn fields(&self) -> Vec<&str> {
        self.terms.iter().map(|t| t.field.as_str()).collect()
    }

    /// Matches against a field lookup; a missing field counts as the empty string, as in Go.
    pub fn matches(&self, get: &dyn Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let v = get(&t.field).unwrap_or_default();
            match t.op {
                FieldOp::Equals => v == t.value,
                FieldOp::NotEquals => v != t.value,
            }
        })
    }

    /// The value pinned by a `field=value` / `field==value` term, if any.
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|t| t.op == FieldOp::Equals && t.field == field).map(|t| t.value.as_str())
    }
}

fn path<'a>(obj: &'a Value, p: &[&str]) -> Option<&'a Value> {
    p.iter().try_fold(obj, |v, k| v.get(*k))
}

fn path_str(obj: &Value, p: &[&str]) -> Option<String> {
    path(obj, p).and_then(|v| match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    })
}

/// Whether kube-apiserver accepts `field` in a field selector for this resource.
/// `group` is "" for core.
pub fn supported_field(group: &str, plural: &str, field: &str) -> bool {
    if field == "metadata.name" || field == "metadata.namespace" {
        return true;
    }
    resource_field(group, plural, field).is_some()
}

/// A supported extra field of a type: its group and resource, the field's name in a selector, the JSON
/// path it reads, and the default the API server would have filled in.
type FieldRow = (&'static str, &'static str, &'static str, &'static [&'static str], Option<&'static str>);

/// Every type's extra fields (`events.k8s.io/v1` names some of core events' stored fields differently).
const FIELDS: &[FieldRow] = &[
    ("", "pods", "spec.nodeName", &["spec", "nodeName"], None),
    ("", "pods", "spec.restartPolicy", &["spec", "restartPolicy"], Some("Always")),
    ("", "pods", "spec.schedulerName", &["spec", "schedulerName"], Some("default-scheduler")),
    ("", "pods", "spec.serviceAccountName", &["spec", "serviceAccountName"], None),
    ("", "pods", "spec.hostNetwork", &["spec", "hostNetwork"], Some("false")),
    ("", "pods", "status.phase", &["status", "phase"], Some("Pending")),
    ("", "pods", "status.podIP", &["status", "podIP"], None),
    ("", "pods", "status.nominatedNodeName", &["status", "nominatedNodeName"], None),
    ("", "events", "involvedObject.kind", &["involvedObject", "kind"], None),
    ("", "events", "involvedObject.namespace", &["involvedObject", "namespace"], None),
    ("", "events", "involvedObject.name", &["involvedObject", "name"], None),
    ("", "events", "involvedObject.uid", &["involvedObject", "uid"], None),
    ("", "events", "involvedObject.apiVersion", &["involvedObject", "apiVersion"], None),
    ("", "events", "involvedObject.resourceVersion", &["involvedObject", "resourceVersion"], None),
    ("", "events", "involvedObject.fieldPath", &["involvedObject", "fieldPath"], None),
    ("", "events", "reason", &["reason"], None),
    ("", "events", "reportingComponent", &["reportingComponent"], None),
    ("", "events", "source", &["source", "component"], None),
    ("", "events", "type", &["type"], None),
    ("events.k8s.io", "events", "regarding.kind", &["regarding", "kind"], None),
    ("events.k8s.io", "events", "regarding.namespace", &["regarding", "namespace"], None),
    ("events.k8s.io", "events", "regarding.name", &["regarding", "name"], None),
    ("events.k8s.io", "events", "regarding.uid", &["regarding", "uid"], None),
    ("events.k8s.io", "events", "regarding.apiVersion", &["regarding", "apiVersion"], None),
    ("events.k8s.io", "events", "regarding.resourceVersion", &["regarding", "resourceVersion"], None),
    ("events.k8s.io", "events", "regarding.fieldPath", &["regarding", "fieldPath"], None),
    ("events.k8s.io", "events", "reason", &["reason"], None),
    ("events.k8s.io", "events", "reportingController", &["reportingController"], None),
    ("events.k8s.io", "events", "type", &["type"], None),
    ("", "nodes", "spec.unschedulable", &["spec", "unschedulable"], Some("false")),
    ("certificates.k8s.io", "certificatesigningrequests", "spec.signerName", &["spec", "signerName"], None),
    ("", "secrets", "type", &["type"], Some("Opaque")),
    ("", "namespaces", "status.phase", &["status", "phase"], Some("Active")),
    ("", "services", "spec.clusterIP", &["spec", "clusterIP"], None),
    ("", "services", "spec.type", &["spec", "type"], Some("ClusterIP")),
    ("", "replicationcontrollers", "status.replicas", &["status", "replicas"], Some("0")),
    ("apps", "replicasets", "status.replicas", &["status", "replicas"], Some("0")),
    ("batch", "jobs", "status.successful", &["status", "succeeded"], Some("0")),
];

/// A top-level field of an Event under its other API's name (see `registry::convert`).
fn event_alias(field: &str) -> Option<&'static str> {
    const ALIASES: [(&str, &str); 4] = [
        ("regarding", "involvedObject"),
        ("reportingController", "reportingComponent"),
        ("note", "message"),
        ("deprecatedSource", "source"),
    ];
    ALIASES.iter().find_map(|(events, core)| match field {
        f if f == *events => Some(*core),
        f if f == *core => Some(*events),
        _ => None,
    })
}

/// Per-type extra fields: the JSON path to read, and a default the API server would have filled in.
fn resource_field(group: &str, plural: &str, field: &str) -> Option<(&'static [&'static str], Option<&'static str>)> {
    FIELDS
        .iter()
        .find(|(g, p, f, _, _)| (*g, *p, *f) == (group, plural, field))
        .map(|(_, _, _, path, default)| (*path, *default))
}

/// The JSON paths every type's extra fields read (some twice), and `status.podIPs`, which a pod's
/// `status.podIP` falls back to: all of them, as one cache may serve a type under two groups (core and
/// `events.k8s.io` events), whose fields differ.
pub fn field_paths() -> impl Iterator<Item = &'static [&'static str]> {
    FIELDS.iter().map(|row| row.3).chain(std::iter::once(&["status", "podIPs"][..]))
}

/// The value of a supported field selector path for an object, or None when the field is not
/// supported for this resource. Absent values the API server would default are reported with
/// that default; other absent values are "".
pub fn field_value(group: &str, plural: &str, obj: &Value, field: &str) -> Option<String> {
    match field {
        "metadata.name" => {
            return Some(path_str(obj, &["metadata", "name"]).unwrap_or_default());
        }
        "metadata.namespace" => {
            return Some(path_str(obj, &["metadata", "namespace"]).unwrap_or_default());
        }
        _ => {}
    }
    // A cached or stored event is read in core's form for either API (whose names for its fields
    // the request was checked against): the other API's names are read too.
    let other_events = match (group, plural) {
        ("", "events") => Some("events.k8s.io"),
        ("events.k8s.io", "events") => Some(""),
        _ => None,
    };
    let (p, default) = resource_field(group, plural, field).or_else(|| resource_field(other_events?, plural, field))?;
    // An event in the other API's form (core and events.k8s.io Events are one resource, read
    // from the store or the watch cache in core's form): the same field under its other name.
    if plural == "events" && path(obj, p).is_none() {
        if let Some((other, rest)) = p.split_first().and_then(|(first, rest)| Some((event_alias(first)?, rest))) {
            let alias: Vec<&str> = std::iter::once(other).chain(rest.iter().copied()).collect();
            if let Some(v) = path_str(obj, &alias) {
                return Some(v);
            }
        }
    }
    // Pods report their first IP when only status.podIPs is filled.
    if field == "status.podIP" && path(obj, p).is_none() {
        return Some(
            path_str(obj, &["status", "podIPs"])
                .and(obj.pointer("/status/podIPs/0/ip").and_then(Value::as_str))
                .map(str::to_string)
                .unwrap_or_default(),
        );
    }
    Some(path_str(obj, p).filter(|s| !s.is_empty()).or_else(|| default.map(str::to_string)).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    fn m(sel: &str, l: Value) -> bool {
        LabelSelector::parse(sel).expect("parses").matches(Some(&labels(l)))
    }

    fn err(sel: &str) -> String {
        LabelSelector::parse(sel).expect_err("must fail").to_string()
    }

    #[test]
    fn empty_selects_everything() {
        let s = LabelSelector::parse("").unwrap();
        assert!(s.is_empty());
        assert!(s.matches(None));
        assert!(LabelSelector::parse("   ").unwrap().is_empty());
    }

    #[test]
    fn equality_forms() {
        assert!(m("a=b", json!({"a": "b"})));
        assert!(m("a==b", json!({"a": "b"})));
        assert!(!m("a=b", json!({"a": "c"})));
        assert!(!m("a=b", json!({})));
        assert!(m("a!=b", json!({"a": "c"})));
        assert!(!m("a!=b", json!({"a": "b"})));
        // != matches objects lacking the label.
        assert!(m("a!=b", json!({})));
        assert!(LabelSelector::parse("a!=b").unwrap().matches(None));
    }

    #[test]
    fn empty_value_equality() {
        assert!(m("a=", json!({"a": ""})));
        assert!(!m("a=", json!({})));
        assert!(m("a=,b", json!({"a": "", "b": "x"})));
    }

    #[test]
    fn set_forms() {
        assert!(m("a in (x,y)", json!({"a": "y"})));
        assert!(!m("a in (x,y)", json!({"a": "z"})));
        assert!(!m("a in (x,y)", json!({})));
        assert!(m("a notin (x,y)", json!({"a": "z"})));
        assert!(!m("a notin (x,y)", json!({"a": "x"})));
        assert!(m("a notin (x,y)", json!({})));
        // keywords are plain values inside the parentheses
        assert!(m("a in (in,notin)", json!({"a": "notin"})));
        // `()` is the set holding only the empty value, as in apimachinery
        assert!(m("a in ()", json!({"a": ""})));
        assert!(!m("a in ()", json!({"a": "x"})));
        // empty members stand for ""
        assert!(m("a in (,x)", json!({"a": ""})));
        assert!(m("a in (x,)", json!({"a": ""})));
        assert!(m("a in (x,,y)", json!({"a": ""})));
    }

    #[test]
    fn exists_forms() {
        assert!(m("a", json!({"a": "1"})));
        assert!(!m("a", json!({})));
        assert!(m("!a", json!({})));
        assert!(!m("!a", json!({"a": ""})));
        assert!(m("a,!b", json!({"a": "1"})));
        assert!(LabelSelector::parse("!a").unwrap().matches(None));
        assert!(!LabelSelector::parse("a").unwrap().matches(None));
    }

    #[test]
    fn greater_less() {
        assert!(m("a>5", json!({"a": "6"})));
        assert!(!m("a>5", json!({"a": "5"})));
        assert!(m("a<5", json!({"a": "-1"})));
        assert!(!m("a<5", json!({"a": "x"})));
        assert!(!m("a<5", json!({})));
        assert_eq!(
            err("a>x"),
            "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
    }

    #[test]
    fn whitespace_and_and() {
        assert!(m("  app = web ,  tier in ( a , b ) , !gone ", json!({"app": "web", "tier": "b"})));
        assert!(!m("app=web,tier=db", json!({"app": "web", "tier": "b"})));
        let s = LabelSelector::parse("z=1,a=2").unwrap();
        assert_eq!(s.requirements[0].key, "a");
    }

    #[test]
    fn prefixed_keys() {
        assert!(m("app.kubernetes.io/name=web", json!({"app.kubernetes.io/name": "web"})));
        let long_name = "a".repeat(63);
        assert!(LabelSelector::parse(&format!("x.io/{long_name}")).is_ok());
    }

    #[test]
    fn set_values_match_in_any_order() {
        let many: Vec<String> = (0..500).rev().map(|i| format!("v{i}")).collect();
        let sel = format!("tier in (zeta,{},alpha)", many.join(","));
        for hit in ["zeta", "alpha", "v0", "v250", "v499"] {
            assert!(m(&sel, json!({"tier": hit})), "{hit}");
            assert!(!m(&sel.replace(" in ", " notin "), json!({"tier": hit})), "{hit}");
        }
        assert!(!m(&sel, json!({"tier": "v500"})));
        assert!(m(&sel.replace(" in ", " notin "), json!({"tier": "beta"})));
    }

    #[test]
    fn non_string_label_values_compare_as_text() {
        assert!(m("a=1", json!({"a": 1})));
    }

    #[test]
    fn syntax_errors() {
        assert_eq!(err("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(err("a,"), "found '', expected: identifier after ','");
        assert_eq!(err(",a"), "found ',', expected: !, identifier, or 'end of string'");
        assert_eq!(err("=a"), "found '=', expected: !, identifier, or 'end of string'");
        assert_eq!(err("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
        assert_eq!(err("!=a"), "found '!=', expected: !, identifier, or 'end of string'");
        assert_eq!(err("!,a"), "unable to parse requirement: found ',', expected: identifier");
        assert_eq!(err("a in x"), "unable to parse requirement: found 'x' expected: '('");
        assert_eq!(err("a in (x"), "unable to parse requirement: found '', expected: ',' or ')'");
        assert_eq!(err("a in (="), "unable to parse requirement: found '=', expected: ',', ')' or identifier");
        assert_eq!(err("a in (x,="), "unable to parse requirement: found '=', expected: ',', or identifier");
        assert_eq!(err("a=(x)"), "unable to parse requirement: found '(', expected: identifier");
        assert_eq!(err("!a=b"), "found '=', expected: ',' or 'end of string'");
    }

    #[test]
    fn invalid_key_messages() {
        assert_eq!(
            err("app:monolith"),
            "unable to parse requirement: <nil>: Invalid value: \"app:monolith\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
        );
        assert_eq!(
            err("a/b/c=d"),
            "unable to parse requirement: <nil>: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        );
        assert_eq!(
            err("app.kubernetes_io/name=x"),
            "unable to parse requirement: <nil>: Invalid value: \"app.kubernetes_io/name\": prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_eq!(
            err("/a"),
            "unable to parse requirement: <nil>: Invalid value: \"/a\": prefix part must be non-empty"
        );
        let long = "a".repeat(64);
        assert_eq!(
            err(&long),
            format!(
                "unable to parse requirement: <nil>: Invalid value: \"{long}\": name part must be no more than 63 characters"
            )
        );
        assert!(err("x/").contains("name part must be non-empty; name part must consist"));
        let long_prefix = format!("{}.io/a", "a".repeat(254));
        assert!(err(&long_prefix).contains("prefix part must be no more than 253 characters"));
    }

    #[test]
    fn invalid_value_messages() {
        assert_eq!(
            err("app=demo-{nginx}"),
            "unable to parse requirement: values[0][app]: Invalid value: \"demo-{nginx}\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        );
        let long = "v".repeat(64);
        assert_eq!(
            err(&format!("a={long}")),
            format!(
                "unable to parse requirement: values[0][a]: Invalid value: \"{long}\": must be no more than 63 characters"
            )
        );
        assert!(err("a in (ok,-bad)").starts_with("unable to parse requirement: values[0][a]: Invalid value: \"-bad\""));
        assert!(err("a in (-x,-y)").starts_with("unable to parse requirement: [values[0][a]"));
        assert!(LabelSelector::parse("a=My_Value-1.2").is_ok());
    }

    #[test]
    fn field_parse_and_match() {
        let s = FieldSelector::parse("metadata.name=foo,metadata.namespace!=kube-system").unwrap();
        assert!(!s.is_empty());
        assert_eq!(s.fields(), vec!["metadata.name", "metadata.namespace"]);
        let get = |f: &str| match f {
            "metadata.name" => Some("foo".to_string()),
            "metadata.namespace" => Some("default".to_string()),
            _ => None,
        };
        assert!(s.matches(&get));
        let s2 = FieldSelector::parse("metadata.name==bar").unwrap();
        assert!(!s2.matches(&get));
        assert_eq!(s2.exact("metadata.name"), Some("bar"));
        assert_eq!(s.exact("metadata.namespace"), None);
        assert_eq!(s.exact("metadata.name"), Some("foo"));
        // a missing field compares as ""
        let s3 = FieldSelector::parse("spec.nodeName=").unwrap();
        assert!(s3.matches(&|_| None));
        assert!(FieldSelector::parse("x!=y").unwrap().matches(&|_| None));
    }

    #[test]
    fn field_empty_and_blank_terms() {
        assert!(FieldSelector::parse("").unwrap().is_empty());
        assert!(FieldSelector::parse(",,").unwrap().is_empty());
        assert!(FieldSelector::parse("").unwrap().matches(&|_| None));
    }

    #[test]
    fn field_escapes() {
        let s = FieldSelector::parse(r"metadata.name=a\,b\=c\\d").unwrap();
        assert_eq!(s.terms.len(), 1);
        assert_eq!(s.exact("metadata.name"), Some(r"a,b=c\d"));
        assert_eq!(
            FieldSelector::parse(r"a=b\x").unwrap_err().to_string(),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            FieldSelector::parse(r"a=b\").unwrap_err().to_string(),
            r"invalid field selector: invalid escape sequence: \"
        );
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err().to_string(),
            "invalid field selector: unescaped character in value: ="
        );
    }

    #[test]
    fn field_operator_split() {
        let s = FieldSelector::parse("a!=b").unwrap();
        assert_eq!(s.terms[0].op, FieldOp::NotEquals);
        assert_eq!(s.terms[0].field, "a");
        let s = FieldSelector::parse("a==b").unwrap();
        assert_eq!(s.terms[0].op, FieldOp::Equals);
        assert_eq!(s.terms[0].value, "b");
        // spaces are kept, so the caller rejects "a " as unsupported
        let s = FieldSelector::parse("a = b").unwrap();
        assert_eq!(s.fields(), vec!["a "]);
        assert_eq!(
            FieldSelector::parse("metadata.name").unwrap_err().to_string(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            FieldSelector::parse("a=b,c").unwrap_err().to_string(),
            "invalid selector: 'a=b,c'; can't understand 'c'"
        );
    }

    #[test]
    fn field_values_generic_and_typed() {
        let cm = json!({"metadata": {"name": "c1", "namespace": "ns"}});
        assert_eq!(field_value("", "configmaps", &cm, "metadata.name").as_deref(), Some("c1"));
        assert_eq!(field_value("", "configmaps", &cm, "metadata.namespace").as_deref(), Some("ns"));
        assert_eq!(field_value("", "configmaps", &cm, "data.x"), None);
        assert!(!supported_field("", "configmaps", "type"));
        assert!(supported_field("", "configmaps", "metadata.name"));
        assert!(supported_field("example.com", "widgets", "metadata.namespace"));

        let sec = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls"});
        assert_eq!(field_value("", "secrets", &sec, "type").as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(field_value("", "secrets", &json!({}), "type").as_deref(), Some("Opaque"));
        assert_eq!(field_value("", "secrets", &json!({}), "metadata.namespace").as_deref(), Some(""));

        let ev = json!({"involvedObject": {"kind": "ConfigMap", "name": "cm1", "namespace": "default", "uid": "u1"},
                         "source": {"component": "kubelet"}, "type": "Normal", "reason": "Created",
                         "reportingComponent": "kubelet"});
        for (f, v) in [
            ("involvedObject.kind", "ConfigMap"),
            ("involvedObject.name", "cm1"),
            ("involvedObject.namespace", "default"),
            ("involvedObject.uid", "u1"),
            ("involvedObject.fieldPath", ""),
            ("source", "kubelet"),
            ("type", "Normal"),
            ("reason", "Created"),
            ("reportingComponent", "kubelet"),
        ] {
            assert_eq!(field_value("", "events", &ev, f).as_deref(), Some(v), "{f}");
            assert!(supported_field("", "events", f));
        }
        assert!(!supported_field("", "events", "message"));
        let ev2 = json!({"regarding": {"kind": "Pod"}, "reportingController": "x"});
        assert_eq!(field_value("events.k8s.io", "events", &ev2, "regarding.kind").as_deref(), Some("Pod"));
        assert_eq!(field_value("events.k8s.io", "events", &ev2, "reportingController").as_deref(), Some("x"));
    }

    #[test]
    fn field_values_pods_and_others() {
        let pod = json!({"spec": {"nodeName": "n1", "hostNetwork": true, "serviceAccountName": "sa"},
                         "status": {"podIPs": [{"ip": "10.0.0.1"}]}});
        let f = |k: &str| field_value("", "pods", &pod, k);
        assert_eq!(f("spec.nodeName").as_deref(), Some("n1"));
        assert_eq!(f("spec.hostNetwork").as_deref(), Some("true"));
        assert_eq!(f("spec.restartPolicy").as_deref(), Some("Always"));
        assert_eq!(f("spec.schedulerName").as_deref(), Some("default-scheduler"));
        assert_eq!(f("spec.serviceAccountName").as_deref(), Some("sa"));
        assert_eq!(f("status.phase").as_deref(), Some("Pending"));
        assert_eq!(f("status.podIP").as_deref(), Some("10.0.0.1"));
        assert_eq!(f("status.nominatedNodeName").as_deref(), Some(""));
        assert_eq!(field_value("", "pods", &json!({}), "spec.hostNetwork").as_deref(), Some("false"));
        assert_eq!(field_value("", "namespaces", &json!({}), "status.phase").as_deref(), Some("Active"));
        assert_eq!(
            field_value("batch", "jobs", &json!({"status": {"succeeded": 2}}), "status.successful").as_deref(),
            Some("2")
        );
        assert_eq!(field_value("apps", "replicasets", &json!({}), "status.replicas").as_deref(), Some("0"));
        assert!(!supported_field("apps", "deployments", "status.replicas"));

        // end to end: selector + lookup
        let sel = FieldSelector::parse("spec.nodeName=n1,status.phase!=Running").unwrap();
        assert!(sel.fields().iter().all(|f| supported_field("", "pods", f)));
        assert!(sel.matches(&|k| field_value("", "pods", &pod, k)));
    }
}
