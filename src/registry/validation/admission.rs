//! Webhook configurations as kube checks them (`pkg/apis/admissionregistration/validation` and the
//! apiserver's webhook URL and service checks): what an operator's chart writes is held to kube's
//! rules, though kgate stores webhooks and calls none. Their selectors are checked as label selectors
//! where they are; match conditions' CEL is not compiled.

use super::*;

/// The review versions kube's webhooks understand.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// A Validating- or MutatingWebhookConfiguration (kube's `validateValidatingWebhookConfiguration` and
/// its mutating twin). Rules kube relaxed for objects that already broke them (side effects, review
/// versions, unique names) stay relaxed on updates of such objects.
pub(super) fn webhook_configuration(kind: &str, obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let mutating = kind == "MutatingWebhookConfiguration";
    let webhooks = list(obj, "webhooks");
    let old_webhooks = old.map(|o| list(o, "webhooks")).unwrap_or_default();
    let old_side_effects_ok =
        old_webhooks.iter().all(|w| w["sideEffects"].as_str().is_some_and(|s| s == "None" || s == "NoneOnDryRun"));
    let old_versions_ok = old_webhooks.iter().all(|w| {
        list(w, "admissionReviewVersions").iter().any(|v| v.as_str().is_some_and(|v| REVIEW_VERSIONS.contains(&v)))
    });
    let mut old_names = HashSet::new();
    let old_unique = old_webhooks.iter().all(|w| old_names.insert(w["name"].as_str().unwrap_or_default()));
    let mut names = HashSet::new();
    for (i, w) in webhooks.iter().enumerate() {
        let Some(map) = w.as_object() else { continue };
        let at = format!("webhooks[{i}]");
        webhook(map, &at, mutating, old_side_effects_ok, causes);
        review_versions(w, &format!("{at}.admissionReviewVersions"), old_versions_ok, causes);
        let name = w["name"].as_str().unwrap_or_default();
        if old_unique && !name.is_empty() && !names.insert(name) {
            duplicate(causes, &format!("{at}.name"), name);
        }
    }
}

fn webhook(map: &Map<String, Value>, at: &str, mutating: bool, strict_side_effects: bool, causes: &mut Vec<Cause>) {
    let field = |f: &str| format!("{at}.{f}");
    match map.get("name").and_then(Value::as_str).unwrap_or_default() {
        "" => required(causes, field("name")),
        name => {
            if let Err(why) = meta::validate_dns1123_subdomain(name) {
                invalid(causes, field("name"), format!("{name:?}"), &why);
            } else if name.split('.').count() < 3 {
                let why = "should be a domain with at least three segments separated by dots";
                invalid(causes, field("name"), format!("{name:?}"), why);
            }
        }
    }
    for (j, rule) in map.get("rules").and_then(Value::as_array).into_iter().flatten().enumerate() {
        rule_with_operations(rule, &format!("{at}.rules[{j}]"), causes);
    }
    let set = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    if set("failurePolicy") {
        one_of_at(map, "failurePolicy", at, &["Fail", "Ignore"], causes);
    }
    if set("matchPolicy") {
        one_of_at(map, "matchPolicy", at, &["Equivalent", "Exact"], causes);
    }
    match map.get("sideEffects").and_then(Value::as_str) {
        None => push(
            causes,
            cause(
                "FieldValueRequired",
                &field("sideEffects"),
                "Required value: must specify one of None, NoneOnDryRun",
            ),
        ),
        Some("None" | "NoneOnDryRun") => {}
        Some("Unknown" | "Some") if !strict_side_effects => {}
        Some(other) => {
            not_supported(causes, field("sideEffects"), &Value::String(other.into()), &["None", "NoneOnDryRun"])
        }
    }
    if let Some(n) = map.get("timeoutSeconds").and_then(Value::as_i64).filter(|n| !(1..=30).contains(n)) {
        invalid(causes, field("timeoutSeconds"), n.to_string(), "the timeout value must be between 1 and 30 seconds");
    }
    if mutating && set("reinvocationPolicy") {
        one_of_at(map, "reinvocationPolicy", at, &["IfNeeded", "Never"], causes);
    }
    client_config(map.get("clientConfig").unwrap_or(&Value::Null), &field("clientConfig"), causes);
    match_conditions(map.get("matchConditions"), &field("matchConditions"), causes);
}

/// One rule a webhook is called for (kube's `validateRuleWithOperations` and `validateRule`).
pub(super) fn rule_with_operations(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let field = |f: &str| format!("{at}.{f}");
    let wildcard_alone = |causes: &mut Vec<Cause>, f: &str, go_type: &str, what: &str| {
        let items = list(rule, f);
        if items.is_empty() {
            required(causes, field(f));
        } else if items.len() > 1 && items.iter().any(|i| i == "*") {
            let why = format!("if '*' is present, must not specify other {what}");
            invalid(causes, field(f), go_strings(go_type, items), &why);
        }
    };
    wildcard_alone(causes, "operations", "admissionregistration.OperationType", "operations");
    const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
    for (k, op) in list(rule, "operations").iter().enumerate() {
        if !op.as_str().is_some_and(|op| OPERATIONS.contains(&op)) {
            not_supported(causes, format!("{}[{k}]", field("operations")), op, OPERATIONS);
        }
    }
    wildcard_alone(causes, "apiGroups", "string", "API groups");
    wildcard_alone(causes, "apiVersions", "string", "API versions");
    for (k, v) in list(rule, "apiVersions").iter().enumerate() {
        if v == "" {
            required(causes, format!("{}[{k}]", field("apiVersions")));
        }
    }
    resources(list(rule, "resources"), &field("resources"), causes);
    if let Some(scope) = rule.get("scope").filter(|s| !s.is_null()) {
        if !scope.as_str().is_some_and(|s| ["*", "Cluster", "Namespaced"].contains(&s)) {
            not_supported(causes, field("scope"), scope, &["*", "Cluster", "Namespaced"]);
        }
    }
}

/// A rule's resources (kube's `validateResources`): none empty, and no entry a wildcard already
/// covers.
fn resources(items: &[Value], at: &str, causes: &mut Vec<Cause>) {
    if items.is_empty() {
        required(causes, at.to_string());
    }
    let (mut any_sub_of, mut any_resource_with) = (HashSet::new(), HashSet::new());
    let (mut double_wildcard, mut single_wildcard, mut plain) = (false, false, false);
    for (i, item) in items.iter().enumerate() {
        let resource = item.as_str().unwrap_or_default();
        if resource.is_empty() {
            required(causes, format!("{at}[{i}]"));
            continue;
        }
        double_wildcard |= resource == "*/*";
        single_wildcard |= resource == "*";
        let Some((res, sub)) = resource.split_once('/') else {
            // kube keeps only the last plain entry's word on whether it was the wildcard.
            plain = resource != "*";
            continue;
        };
        if any_sub_of.contains(res) {
            let why = format!("if '{res}/*' is present, must not specify {resource}");
            invalid(causes, format!("{at}[{i}]"), format!("{resource:?}"), &why);
        }
        if any_resource_with.contains(sub) {
            let why = format!("if '*/{sub}' is present, must not specify {resource}");
            invalid(causes, format!("{at}[{i}]"), format!("{resource:?}"), &why);
        }
        if sub == "*" {
            any_sub_of.insert(res);
        }
        if res == "*" {
            any_resource_with.insert(sub);
        }
    }
    if items.len() > 1 && double_wildcard {
        let why = "if '*/*' is present, must not specify other resources";
        invalid(causes, at.to_string(), go_strings("string", items), why);
    }
    if single_wildcard && plain {
        let why = "if '*' is present, must not specify other resources without subresources";
        invalid(causes, at.to_string(), go_strings("string", items), why);
    }
}

/// Where a webhook is called (kube's `ValidateWebhookURL` and `ValidateWebhookService`): a URL or a
/// Service, exactly one.
fn client_config(config: &Value, at: &str, causes: &mut Vec<Cause>) {
    let url = config.get("url").and_then(Value::as_str);
    let service = config.get("service").filter(|s| s.is_object());
    match (url, service) {
        (Some(url), None) => webhook_url(url, &format!("{at}.url"), causes),
        (None, Some(service)) => webhook_service(service, &format!("{at}.service"), causes),
        _ => push(causes, cause("FieldValueRequired", at, "Required value: exactly one of url or service is required")),
    }
}

/// A webhook's URL, read as Go's `url.Parse` reads one: `https`, a host, no user, query or fragment.
fn webhook_url(url: &str, at: &str, causes: &mut Vec<Cause>) {
    const FORM: &str = "; desired format: https://host[/path]";
    let (rest, fragment) = url.split_once('#').unwrap_or((url, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let scheme_end = rest.find(':').filter(|&i| {
        let s = &rest[..i];
        s.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    });
    let (scheme, rest) = match scheme_end {
        Some(i) => (rest[..i].to_ascii_lowercase(), &rest[i + 1..]),
        None => (String::new(), rest),
    };
    let authority = rest.strip_prefix("//").map(|a| &a[..a.find('/').unwrap_or(a.len())]).unwrap_or_default();
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    if scheme != "https" {
        invalid(
            causes,
            at.to_string(),
            format!("{scheme:?}"),
            &format!("'https' is the only allowed URL scheme{FORM}"),
        );
    }
    if host.is_empty() {
        invalid(causes, at.to_string(), "\"\"".into(), &format!("host must be specified{FORM}"));
    }
    if let Some(user) = user {
        invalid(causes, at.to_string(), format!("{user:?}"), "user information is not permitted in the URL");
    }
    if !fragment.is_empty() {
        invalid(causes, at.to_string(), format!("{fragment:?}"), "fragments are not permitted in the URL");
    }
    if !query.is_empty() {
        invalid(causes, at.to_string(), format!("{query:?}"), "query parameters are not permitted in the URL");
    }
}

/// A webhook's Service: a name, a namespace, a port, a path of DNS subdomains. kube passes the name
/// and namespace to its check swapped, so each one's absence is reported at the other's place.
fn webhook_service(service: &Value, at: &str, causes: &mut Vec<Cause>) {
    if service["namespace"].as_str().unwrap_or_default().is_empty() {
        push(causes, cause("FieldValueRequired", &format!("{at}.name"), "Required value: service name is required"));
    }
    if service["name"].as_str().unwrap_or_default().is_empty() {
        push(
            causes,
            cause("FieldValueRequired", &format!("{at}.namespace"), "Required value: service namespace is required"),
        );
    }
    if let Some(port) = service["port"].as_i64().filter(|p| !(1..=65535).contains(p)) {
        let why = "port is not valid: must be between 1 and 65535, inclusive";
        invalid(causes, format!("{at}.port"), port.to_string(), why);
    }
    let path = service["path"].as_str().unwrap_or_default();
    let here = format!("{at}.path");
    match path {
        "" | "/" => {}
        "//" => invalid(causes, here, format!("{path:?}"), "segment[0] may not be empty"),
        _ => {
            if !path.starts_with('/') {
                invalid(causes, here.clone(), format!("{path:?}"), "must start with a '/'");
            }
            let steps = path.get(1..).unwrap_or_default();
            let steps = steps.strip_suffix('/').unwrap_or(steps);
            for (i, step) in steps.split('/').enumerate() {
                if step.is_empty() {
                    invalid(causes, here.clone(), format!("{path:?}"), &format!("segment[{i}] may not be empty"));
                } else {
                    for why in meta::dns1123_subdomain_errors(step) {
                        invalid(causes, here.clone(), format!("{path:?}"), &format!("segment[{i}]: {why}"));
                    }
                }
            }
        }
    }
}

/// The review versions a webhook reads: each once, each a DNS-1035 label, one kube sends.
fn review_versions(webhook: &Value, at: &str, require_known: bool, causes: &mut Vec<Cause>) {
    let versions = list(webhook, "admissionReviewVersions");
    if versions.is_empty() {
        let why = format!("Required value: must specify one of {}", REVIEW_VERSIONS.join(", "));
        return push(causes, cause("FieldValueRequired", at, why));
    }
    let mut seen = HashSet::new();
    for (i, v) in versions.iter().enumerate() {
        let text = v.as_str().unwrap_or_default();
        if !seen.insert(text) {
            invalid(causes, format!("{at}[{i}]"), format!("{text:?}"), "duplicate version");
            continue;
        }
        for why in meta::dns1035_label_errors(text) {
            invalid(causes, format!("{at}[{i}]"), format!("{text:?}"), &why);
        }
    }
    if require_known && !versions.iter().any(|v| v.as_str().is_some_and(|v| REVIEW_VERSIONS.contains(&v))) {
        let why = format!("must include at least one of {}", REVIEW_VERSIONS.join(", "));
        invalid(causes, at.to_string(), go_strings("string", versions), &why);
    }
}

/// A webhook's match conditions: at most 64, each named once by a qualified name, each with an
/// expression (not compiled: kgate runs no CEL yet).
pub(super) fn match_conditions(conditions: Option<&Value>, at: &str, causes: &mut Vec<Cause>) {
    let conditions = conditions.and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if conditions.len() > 64 {
        let why = format!("Too many: {}: must have at most 64 items", conditions.len());
        push(causes, cause("FieldValueTooMany", at, why));
    }
    let mut names = HashSet::new();
    for (i, c) in conditions.iter().enumerate() {
        let here = format!("{at}[{i}]");
        match c["name"].as_str().unwrap_or_default() {
            "" => required(causes, format!("{here}.name")),
            name => {
                for why in meta::qualified_name_errors(name) {
                    invalid(causes, format!("{here}.name"), format!("{name:?}"), &why);
                }
                if !names.insert(name) {
                    duplicate(causes, &format!("{here}.name"), name);
                }
            }
        }
        if c["expression"].as_str().unwrap_or_default().trim().is_empty() {
            required(causes, format!("{here}.expression"));
        }
    }
}
