//! Options of writes, deletes and lists, read from the query string (and DeleteOptions bodies) and
//! validated as kube-apiserver validates them.

use serde_json::Value;

use crate::request::Query;
use crate::selector::{FieldSelector, LabelSelector};
use crate::status::{ApiError, ApiResult};

/// `fieldValidation`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Reject unknown fields.
    Strict,
    /// Drop them with a warning (the default).
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// What kube-apiserver's strict decoder makes of fields set twice in a `kind` body (the last value
    /// is kept): with `Strict` a 400, with `Warn` (the server's default) a warning each.
    pub fn duplicates(self, def: &crate::resources::ResourceDef, duplicates: &[String]) -> ApiResult<Vec<String>> {
        let each = duplicates.iter().map(|d| format!("duplicate field \"{d}\""));
        match self {
            _ if duplicates.is_empty() => Ok(Vec::new()),
            FieldValidation::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                each.collect::<Vec<_>>().join(", "),
                kind = def.kind,
                version = def.version,
            ))),
            FieldValidation::Warn => Ok(each.collect()),
            FieldValidation::Ignore => Ok(Vec::new()),
        }
    }
}

/// Options every write accepts.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager`.
    pub field_manager: Option<String>,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (apply patches only).
    pub force: Option<bool>,
}

fn dry_run(values: &[&str]) -> ApiResult<bool> {
    let mut on = false;
    for v in values {
        match *v {
            "All" => on = true,
            "" => {}
            other => {
                return Err(ApiError::invalid(
                    "DeleteOptions",
                    "",
                    "",
                    vec![crate::status::cause(
                        "FieldValueNotSupported",
                        "dryRun",
                        format!("Unsupported value: \"{other}\": supported values: \"All\""),
                    )],
                ))
            }
        }
    }
    Ok(on)
}

impl WriteOptions {
    /// Read from the query.
    pub fn from_query(q: &Query) -> ApiResult<Self> {
        let field_validation = match q.non_empty("fieldValidation") {
            None | Some("Warn") => FieldValidation::Warn,
            Some("Strict") => FieldValidation::Strict,
            Some("Ignore") => FieldValidation::Ignore,
            Some(v) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation parameter unsupported: {v}. Supported values: Ignore, Strict, Warn"
                )))
            }
        };
        let field_manager = q.non_empty("fieldManager").map(str::to_string);
        if let Some(m) = &field_manager {
            if m.len() > 128 {
                return Err(ApiError::invalid(
                    "PatchOptions",
                    "",
                    "",
                    vec![crate::status::cause(
                        "FieldValueTooLong",
                        "fieldManager",
                        "Too long: may not be more than 128 bytes",
                    )],
                ));
            }
        }
        let force = match q.get("force") {
            None => None,
            Some(_) => Some(q.flag("force")?),
        };
        Ok(WriteOptions { dry_run: dry_run(&[q.get("dryRun").unwrap_or("")])?, field_manager, field_validation, force })
    }

    /// The manager to record: `fieldManager`, else the User-Agent's first word (as kube-apiserver).
    pub fn manager(&self, user_agent: Option<&str>) -> String {
        if let Some(m) = &self.field_manager {
            return m.clone();
        }
        match user_agent.map(|ua| ua.split('/').next().unwrap_or("")).filter(|s| !s.is_empty()) {
            Some(prefix) => prefix.to_string(),
            None => "unknown".to_string(),
        }
    }
}

/// `propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Delete dependents after.
    Background,
    /// Delete dependents first.
    Foreground,
    /// Leave dependents.
    Orphan,
}

/// DeleteOptions from the body or the query (nulls accepted, as Ansible sends them).
#[derive(Debug, Clone)]
pub struct DeleteOptions {
    /// `dryRun: ["All"]`.
    pub dry_run: bool,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `propagationPolicy` (or the deprecated `orphanDependents`); `None` when the request gave
    /// neither, which leaves the object's finalizers and its type's default to decide (kube's rule).
    pub propagation: Option<Propagation>,
    /// `gracePeriodSeconds`.
    pub grace_period: Option<i64>,
}

impl DeleteOptions {
    /// Merge a DeleteOptions body (may be empty) with the query.
    pub fn parse(body: Option<&Value>, q: &Query) -> ApiResult<Self> {
        let body = match body {
            None | Some(Value::Null) => Value::Object(Default::default()),
            Some(Value::Object(m)) => Value::Object(m.clone()),
            Some(_) => return Err(ApiError::bad_request("DeleteOptions must be a JSON object")),
        };
        if let Some(k) = body.get("kind").and_then(Value::as_str) {
            if k != "DeleteOptions" {
                return Err(ApiError::bad_request(format!("expected DeleteOptions, got {k}")));
            }
        }
        let str_field = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        let mut dry: Vec<String> = body
            .get("dryRun")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        if let Some(d) = q.get("dryRun") {
            dry.push(d.to_string());
        }
        let dry_run = dry_run(&dry.iter().map(String::as_str).collect::<Vec<_>>())?;
        let pre = body.get("preconditions");
        let policy =
            str_field(body.get("propagationPolicy")).or_else(|| q.non_empty("propagationPolicy").map(str::to_string));
        let orphan = body.get("orphanDependents").and_then(Value::as_bool).or(match q.get("orphanDependents") {
            Some(_) => Some(q.flag("orphanDependents")?),
            None => None,
        });
        let propagation = match (policy.as_deref(), orphan) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "DeleteOptions",
                    "",
                    "",
                    vec![crate::status::cause(
                        "FieldValueInvalid",
                        "propagationPolicy",
                        "Invalid value: \"\": orphanDependents and deletionPropagation cannot be both set",
                    )],
                ))
            }
            (Some("Background"), _) | (None, Some(false)) => Some(Propagation::Background),
            (Some("Foreground"), _) => Some(Propagation::Foreground),
            (Some("Orphan"), _) | (None, Some(true)) => Some(Propagation::Orphan),
            (None, None) => None,
            (Some(other), _) => {
                return Err(ApiError::invalid(
                    "DeleteOptions",
                    "",
                    "",
                    vec![crate::status::cause(
                        "FieldValueNotSupported",
                        "propagationPolicy",
                        format!("Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""),
                    )],
                ))
            }
        };
        let grace_period = match body.get("gracePeriodSeconds").and_then(Value::as_i64) {
            Some(g) => Some(g),
            None => q.int("gracePeriodSeconds")?,
        };
        Ok(DeleteOptions {
            dry_run,
            uid: str_field(pre.and_then(|p| p.get("uid"))),
            resource_version: str_field(pre.and_then(|p| p.get("resourceVersion"))),
            propagation,
            grace_period,
        })
    }
}

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// At least as new as the given resourceVersion.
    NotOlderThan,
    /// Exactly the given resourceVersion.
    Exact,
}

/// Which clusters a wildcard request spans, when not all (a custom resource: the clusters whose CRD
/// serves it; see `crd::CrdIndex::wildcard`).
#[derive(Clone)]
pub struct ClusterFilter(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for ClusterFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterFilter")
    }
}

/// Options of list and watch.
#[derive(Debug, Clone)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = all).
    pub limit: usize,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion` (`None` when unset).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<RvMatch>,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout_seconds: Option<i64>,
    /// Set by the server for wildcard requests over custom resources, never from the query.
    pub clusters: Option<ClusterFilter>,
}

/// The most terms the selectors of one request may have in all: far more than any selector written by
/// hand or by a controller, and few enough that testing them on an object costs microseconds.
pub const MAX_SELECTOR_TERMS: usize = 256;

impl ListOptions {
    /// About the memory the parsed selectors hold, for a watch that keeps them as long as it runs.
    pub fn selectors_size(&self) -> usize {
        let text = |s: &String| std::mem::size_of::<String>() + s.len();
        let labels =
            self.labels.requirements.iter().map(|r| 32 + text(&r.key) + r.values.iter().map(text).sum::<usize>());
        let fields = self.fields.terms.iter().map(|t| 8 + text(&t.field) + text(&t.value));
        labels.sum::<usize>() + fields.sum::<usize>()
    }

    /// Read and validate (WIRE.md section 5).
    pub fn from_query(q: &Query, watch_path: bool) -> ApiResult<Self> {
        let labels = LabelSelector::parse(q.get("labelSelector").unwrap_or(""))?;
        let fields = FieldSelector::parse(q.get("fieldSelector").unwrap_or(""))?;
        // Each term is tested on every object listed or watched, by every watch that holds it.
        let terms = labels.requirements.len() + fields.terms.len();
        if terms > MAX_SELECTOR_TERMS {
            return Err(ApiError::bad_request(format!(
                "labelSelector and fieldSelector have {terms} terms, more than {MAX_SELECTOR_TERMS}"
            )));
        }
        let limit = match q.int("limit")? {
            Some(l) if l < 0 => return Err(ApiError::bad_request("limit must be non-negative")),
            Some(l) => l as usize,
            None => 0,
        };
        let resource_version = q.get("resourceVersion").filter(|v| !v.is_empty()).map(str::to_string);
        if let Some(rv) = &resource_version {
            if rv.parse::<i64>().map(|n| n < 0).unwrap_or(true) {
                return Err(ApiError::bad_request(format!("invalid resource version: {rv}")));
            }
        }
        let rv_match = match q.non_empty("resourceVersionMatch") {
            None => None,
            Some("NotOlderThan") => Some(RvMatch::NotOlderThan),
            Some("Exact") => Some(RvMatch::Exact),
            Some(other) => {
                return Err(invalid_list(
                    "resourceVersionMatch",
                    format!("Unsupported value: \"{other}\": supported values: \"Exact\", \"NotOlderThan\", \"\""),
                ))
            }
        };
        let watch = watch_path || q.flag("watch")?;
        let send_initial_events = match q.get("sendInitialEvents") {
            None => None,
            Some(_) => Some(q.flag("sendInitialEvents")?),
        };
        let continue_token = q.non_empty("continue").map(str::to_string);
        let opts = ListOptions {
            labels,
            fields,
            limit,
            continue_token,
            resource_version,
            rv_match,
            watch,
            bookmarks: q.flag("allowWatchBookmarks")?,
            send_initial_events,
            timeout_seconds: q.int("timeoutSeconds")?,
            clusters: None,
        };
        opts.validate()?;
        Ok(opts)
    }

    /// Whether every object in scope passes (no selector, no cluster filter): then objects need no parsing.
    pub fn selects_all(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.clusters.is_none()
    }

    fn validate(&self) -> ApiResult<()> {
        // A watch list (client-go's reflector, first time) names no resourceVersion: the initial events
        // are then a consistent read, as kube's watch validation allows.
        if self.rv_match.is_some() && self.resource_version.is_none() && !self.watch {
            return Err(invalid_list(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided".into(),
            ));
        }
        if self.rv_match.is_some() && self.continue_token.is_some() {
            return Err(invalid_list(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch is forbidden when continue is provided".into(),
            ));
        }
        if self.rv_match == Some(RvMatch::Exact) && self.resource_version.as_deref() == Some("0") {
            return Err(invalid_list(
                "resourceVersionMatch",
                "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"".into(),
            ));
        }
        if self.continue_token.is_some() && self.resource_version.as_deref().is_some_and(|rv| rv != "0") {
            return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
        }
        match (self.watch, self.send_initial_events) {
            (false, Some(_)) => {
                return Err(invalid_list(
                    "sendInitialEvents",
                    "Forbidden: sendInitialEvents is forbidden for list".into(),
                ))
            }
            (true, Some(true)) if self.rv_match != Some(RvMatch::NotOlderThan) => {
                return Err(invalid_list(
                    "resourceVersionMatch",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
                ))
            }
            (true, Some(_)) if !self.bookmarks => {
                return Err(invalid_list(
                    "allowWatchBookmarks",
                    "Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true".into(),
                ))
            }
            (true, None) if self.rv_match.is_some() => {
                return Err(invalid_list(
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
                        .into(),
                ))
            }
            _ => {}
        }
        Ok(())
    }
}

fn invalid_list(field: &str, msg: String) -> ApiError {
    let mut e = ApiError::invalid(
        "ListOptions",
        "meta.k8s.io",
        "",
        vec![crate::status::cause("FieldValueForbidden", field, msg)],
    );
    // kube-apiserver reports list option problems as 400 BadRequest (the Invalid status is wrapped).
    e.code = 400;
    e.reason = "BadRequest";
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo(q: &str) -> ApiResult<ListOptions> {
        ListOptions::from_query(&Query::parse(Some(q)), false)
    }

    #[test]
    fn list_option_rules() {
        assert!(lo("resourceVersionMatch=NotOlderThan").is_err());
        assert!(lo("resourceVersion=0&resourceVersionMatch=Exact").is_err());
        assert!(lo("continue=abc&resourceVersion=5").is_err());
        assert!(lo("sendInitialEvents=true").is_err());
        assert!(lo("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true").is_ok());
        assert!(lo("watch=true&sendInitialEvents=true&resourceVersion=0").is_err());
        assert!(lo("watch=1&resourceVersion=10&resourceVersionMatch=NotOlderThan").is_err());
        assert!(lo("limit=-1").is_err());
        assert!(lo("resourceVersion=abc").is_err());
        assert_eq!(lo("&limit=500").unwrap().limit, 500);
    }

    #[test]
    fn selectors_have_at_most_so_many_terms() {
        let terms = |n: usize| (0..n).map(|i| format!("k{i}")).collect::<Vec<_>>().join(",");
        let ok =
            lo(&format!("labelSelector={}&fieldSelector=metadata.name%3Dx", terms(MAX_SELECTOR_TERMS - 1))).unwrap();
        assert!(ok.selectors_size() > MAX_SELECTOR_TERMS * 32);
        let err =
            lo(&format!("labelSelector={}&fieldSelector=metadata.name%3Dx", terms(MAX_SELECTOR_TERMS))).unwrap_err();
        assert_eq!(err.code, 400);
        assert!(err.message.contains("257 terms, more than 256"), "{}", err.message);
    }

    #[test]
    fn delete_options_accept_nulls_and_query() {
        let body = serde_json::json!({"apiVersion":"v1","kind":"DeleteOptions","propagationPolicy":"Foreground","gracePeriodSeconds":null,"preconditions":null});
        let o = DeleteOptions::parse(Some(&body), &Query::default()).unwrap();
        assert_eq!(o.propagation, Some(Propagation::Foreground));
        let o = DeleteOptions::parse(None, &Query::parse(Some("dryRun=All"))).unwrap();
        assert!(o.dry_run);
        let o = DeleteOptions::parse(Some(&serde_json::json!({"dryRun":["All"]})), &Query::default()).unwrap();
        assert!(o.dry_run);
        assert!(
            DeleteOptions::parse(Some(&serde_json::json!({"propagationPolicy":"Nope"})), &Query::default()).is_err()
        );
    }

    #[test]
    fn manager_defaults_to_user_agent_prefix() {
        let w = WriteOptions::from_query(&Query::default()).unwrap();
        assert_eq!(w.manager(Some("kubectl/v1.33.1 (linux/amd64) kubernetes/abc")), "kubectl");
        assert_eq!(w.manager(None), "unknown");
        assert!(WriteOptions::from_query(&Query::parse(Some("fieldValidation=Bogus"))).is_err());
    }
}
