//! kube's checks of API Priority and Fairness objects (kube 1.33's `pkg/apis/flowcontrol/validation`):
//! a FlowSchema's precedence, priority level, distinguisher and rules; a PriorityLevelConfiguration's
//! limited or exempt configuration and its queues; and the mandatory objects' fixed specs.

use super::*;
use serde_json::json;

/// The verbs a policy rule may name (kube's `supportedVerbs`, sorted as kube lists a set).
const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "proxy", "update", "watch"];

/// kube's `FlowSchemaMaxMatchingPrecedence`.
const MAX_PRECEDENCE: i64 = 10_000;

/// kube's `priorityLevelConfigurationQueuingMaxQueues`.
const MAX_QUEUES: i64 = 10_000_000;

/// The hash bits shuffle sharding may use (kube's `shufflesharding.MaxHashBits`).
const MAX_HASH_BITS: i64 = 60;

/// A Go pointer that is not nil.
fn set(v: &Value, field: &str) -> bool {
    v.get(field).is_some_and(|x| !x.is_null())
}

fn label_shape(s: &str) -> bool {
    let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    b.first().is_some_and(alnum) && b.last().is_some_and(alnum) && b.iter().all(|c| alnum(c) || *c == b'-')
}

fn subdomain_shape(s: &str) -> bool {
    s.split('.').all(label_shape)
}

/// apimachinery's `IsDNS1123Label`, each broken rule its own message as kube reports them (kgate's
/// `meta` check gives one, and not kube's word for dots). The shape's message is kgate's, asked of
/// the empty string, which has nothing wrong but its shape.
pub(super) fn dns1123_label_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    if !label_shape(s) {
        errs.push(if subdomain_shape(s) {
            "must not contain dots".to_string()
        } else {
            meta::validate_dns1123_label("").err().unwrap_or_default()
        });
    }
    errs
}

/// apimachinery's `IsDNS1123Subdomain`: its length and its shape, each its own message.
pub(super) fn dns1123_subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if !subdomain_shape(s) {
        errs.push(meta::validate_dns1123_subdomain("").err().unwrap_or_default());
    }
    errs
}

/// `v` as Go's `Semantic.DeepEqual` compares the structs it decodes to: a field at its zero value
/// (null, false, "", an empty list) is as good as absent; an empty object stays, since a set pointer
/// to an empty struct is not nil.
fn semantic(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| {
                    !(v.is_null()
                        || v.as_bool() == Some(false)
                        || v.as_str() == Some("")
                        || v.as_array().is_some_and(|a| a.is_empty()))
                })
                .map(|(k, v)| (k.clone(), semantic(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(semantic).collect()),
        other => other.clone(),
    }
}

/// The spec kube fixes for a mandatory FlowSchema (kube's `bootstrap.MandatoryFlowSchemas`), defaulted.
fn mandatory_flow_schema(name: &str) -> Option<Value> {
    let (level, precedence, method, groups): (&str, i64, Option<&str>, &[&str]) = match name {
        "exempt" => ("exempt", 1, None, &["system:masters"][..]),
        "catch-all" => ("catch-all", 10_000, Some("ByUser"), &["system:unauthenticated", "system:authenticated"][..]),
        _ => return None,
    };
    let subjects: Vec<Value> = groups.iter().map(|g| json!({"kind": "Group", "group": {"name": g}})).collect();
    let mut spec = json!({
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
        "rules": [{
            "subjects": subjects,
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true,
                "namespaces": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        }],
    });
    if let Some(method) = method {
        spec["distinguisherMethod"] = json!({"type": method});
    }
    Some(spec)
}

/// The spec kube fixes for a mandatory PriorityLevelConfiguration, defaulted (the exempt level's
/// `exempt` field aside, which its owner may tune).
fn mandatory_level(name: &str) -> Option<Value> {
    match name {
        "exempt" => Some(json!({"type": "Exempt"})),
        "catch-all" => Some(json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5,
            "lendablePercent": 0, "limitResponse": {"type": "Reject"}}})),
        _ => None,
    }
}

/// A FlowSchema (kube's `ValidateFlowSchema`, which updates run as they are): a precedence in
/// range, a priority level named, a known distinguisher, well-formed rules, and the mandatory
/// schemas' fixed specs. Its status is its subresource's to check: kube clears it on creates and
/// keeps the stored one on updates of the object.
pub(super) fn flow_schema(obj: &Value, causes: &mut Vec<Cause>) {
    let name = meta::meta_str(obj, "name").unwrap_or_default();
    let spec = &obj["spec"];
    let precedence = spec["matchingPrecedence"].as_i64().unwrap_or_default();
    let at = || "spec.matchingPrecedence".to_string();
    if precedence <= 0 {
        invalid(causes, at(), precedence.to_string(), "must be a positive value");
    }
    if precedence > MAX_PRECEDENCE {
        invalid(causes, at(), precedence.to_string(), &format!("must not be greater than {MAX_PRECEDENCE}"));
    }
    if precedence == 1 && name != "exempt" {
        invalid(causes, at(), precedence.to_string(), "only the schema named 'exempt' may have matchingPrecedence 1");
    }
    if set(spec, "distinguisherMethod") {
        let method = text(&spec["distinguisherMethod"], "type");
        if !["ByNamespace", "ByUser"].contains(&method) {
            // kube shows the struct it refuses, not the field.
            let message = format!(
                "Unsupported value: flowcontrol.FlowDistinguisherMethod{{Type:{method:?}}}: supported values: \"ByNamespace\", \"ByUser\""
            );
            push(causes, cause("FieldValueNotSupported", "spec.distinguisherMethod.type", message));
        }
    }
    let level = text(&spec["priorityLevelConfiguration"], "name");
    const LEVEL: &str = "spec.priorityLevelConfiguration.name";
    if level.is_empty() {
        required_why(causes, LEVEL, "must reference a priority level");
    }
    for why in dns1123_subdomain_errors(level).iter().filter(|_| !level.is_empty()) {
        invalid(causes, LEVEL.to_string(), format!("{level:?}"), why);
    }
    for (i, rule) in list(spec, "rules").iter().enumerate() {
        rule_with_subjects(rule, &format!("spec.rules[{i}]"), causes);
    }
    if let Some(fixed) = mandatory_flow_schema(name) {
        if semantic(spec) != semantic(&fixed) {
            // kube shows the Go struct, pointers' addresses and all; its JSON says more.
            invalid(causes, "spec".into(), spec.to_string(), &format!("spec of '{name}' must equal the fixed value"));
        }
    }
}

/// kube's `ValidateFlowSchemaPolicyRulesWithSubjects`.
fn rule_with_subjects(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let subjects = list(rule, "subjects");
    if subjects.is_empty() {
        required_why(causes, &format!("{at}.subjects"), "subjects must contain at least one value");
    }
    for (j, s) in subjects.iter().enumerate() {
        subject(s, &format!("{at}.subjects[{j}]"), causes);
    }
    let (resource_rules, non_resource_rules) = (list(rule, "resourceRules"), list(rule, "nonResourceRules"));
    if resource_rules.is_empty() && non_resource_rules.is_empty() {
        required_why(causes, at, "at least one of resourceRules and nonResourceRules has to be non-empty");
    }
    for (j, r) in resource_rules.iter().enumerate() {
        resource_rule(r, &format!("{at}.resourceRules[{j}]"), causes);
    }
    for (j, r) in non_resource_rules.iter().enumerate() {
        non_resource_rule(r, &format!("{at}.nonResourceRules[{j}]"), causes);
    }
}

/// kube's `ValidateFlowSchemaSubject`: the member its kind names, and no other.
fn subject(s: &Value, at: &str, causes: &mut Vec<Cause>) {
    const MEMBERS: [(&str, &str); 3] = [
        ("serviceAccount", "serviceAccount is forbidden when subject kind is not 'ServiceAccount'"),
        ("user", "user is forbidden when subject kind is not 'User'"),
        ("group", "group is forbidden when subject kind is not 'Group'"),
    ];
    let kind = text(s, "kind");
    let own = match kind {
        "ServiceAccount" => "serviceAccount",
        "User" => "user",
        "Group" => "group",
        _ => {
            let supported = ["Group", "ServiceAccount", "User"];
            return not_supported(causes, format!("{at}.kind"), &Value::String(kind.into()), &supported);
        }
    };
    let here = format!("{at}.{own}");
    if set(s, own) {
        let member = &s[own];
        let name = text(member, "name");
        if name.is_empty() {
            required(causes, format!("{here}.name"));
        } else if own == "serviceAccount" && name != "*" {
            for why in dns1123_subdomain_errors(name) {
                invalid(causes, format!("{here}.name"), format!("{name:?}"), &why);
            }
        }
        if own == "serviceAccount" {
            let namespace = text(member, "namespace");
            if namespace.is_empty() {
                required_why(causes, &format!("{here}.namespace"), "must specify namespace for service account");
            }
            for why in dns1123_label_errors(namespace).iter().filter(|_| !namespace.is_empty()) {
                invalid(causes, format!("{here}.namespace"), format!("{namespace:?}"), why);
            }
        }
    } else {
        required_why(causes, &here, &format!("{own} is required when subject kind is '{kind}'"));
    }
    for (member, why) in MEMBERS {
        if member != own && set(s, member) {
            forbidden(causes, &format!("{at}.{member}"), why);
        }
    }
}

/// A list kube wants non-empty, with `*` only alone (`what` names its items); whether it holds
/// items and no `*`, for the checks of each item.
fn wildcard_list(rule: &Value, at: &str, field: &str, what: &str, empty: &str, causes: &mut Vec<Cause>) -> bool {
    let items = list(rule, field);
    let here = format!("{at}.{field}");
    if items.is_empty() {
        required_why(causes, &here, empty);
        return false;
    }
    if !items.iter().any(|i| i == "*") {
        return true;
    }
    if items.len() > 1 {
        invalid(
            causes,
            here,
            go_strings("string", items),
            &format!("if '*' is present, must not specify other {what}"),
        );
    }
    false
}

/// A rule's verbs: `*` alone, or verbs kube knows.
fn verbs(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let plain = wildcard_list(rule, at, "verbs", "verbs", "verbs must contain at least one value", causes);
    let verbs = list(rule, "verbs");
    if plain && !verbs.iter().all(|v| v.as_str().is_some_and(|v| VERBS.contains(&v))) {
        // kube reports the list, not the verb.
        let supported: Vec<String> = VERBS.iter().map(|v| format!("{v:?}")).collect();
        let message =
            format!("Unsupported value: {}: supported values: {}", go_strings("string", verbs), supported.join(", "));
        push(causes, cause("FieldValueNotSupported", &format!("{at}.verbs"), message));
    }
}

/// kube's `ValidateFlowSchemaResourcePolicyRule`.
fn resource_rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    verbs(rule, at, causes);
    let why = "resource rules must supply at least one api group";
    wildcard_list(rule, at, "apiGroups", "api groups", why, causes);
    let why = "resource rules must supply at least one resource";
    wildcard_list(rule, at, "resources", "resources", why, causes);
    let namespaces = list(rule, "namespaces");
    let here = format!("{at}.namespaces");
    if namespaces.is_empty() && rule["clusterScope"] != true {
        let why = "resource rules that are not cluster scoped must supply at least one namespace";
        required_why(causes, &here, why);
    } else if namespaces.iter().any(|n| n == "*") {
        if namespaces.len() > 1 {
            invalid(
                causes,
                here,
                go_strings("string", namespaces),
                "if '*' is present, must not specify other namespaces",
            );
        }
    } else {
        for (k, namespace) in namespaces.iter().enumerate() {
            let namespace = namespace.as_str().unwrap_or_default();
            for why in dns1123_label_errors(namespace) {
                let why = format!("each member of this list must be '*' or a DNS-1123 label; {why}");
                invalid(causes, format!("{here}[{k}]"), format!("{namespace:?}"), &why);
            }
        }
    }
}

/// kube's `ValidateFlowSchemaNonResourcePolicyRule`.
fn non_resource_rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    verbs(rule, at, causes);
    let why = "nonResourceURLs must contain at least one value";
    if wildcard_list(rule, at, "nonResourceURLs", "non-resource URLs", why, causes) {
        for (k, url) in list(rule, "nonResourceURLs").iter().enumerate() {
            if let Some(why) = url_path_problem(url.as_str().unwrap_or_default()) {
                invalid(causes, format!("{at}.nonResourceURLs[{k}]"), shown(url), why);
            }
        }
    }
}

/// kube's `ValidateNonResourceURLPath`: an absolute path, a `*` only as its last segment.
fn url_path_problem(path: &str) -> Option<&'static str> {
    match path {
        "" => Some("must not be empty"),
        "/" => None,
        _ if !path.starts_with('/') => Some("must start with slash"),
        _ if path.contains(' ') => Some("must not contain white-space"),
        _ if path.contains("//") => Some("must not contain double slash"),
        _ if path.matches('*').count() > 1 || (path.contains('*') && !path.ends_with("/*")) => {
            Some("wildcard can only do suffix matching")
        }
        _ => None,
    }
}

/// A PriorityLevelConfiguration (kube's `ValidatePriorityLevelConfiguration`, which updates run as
/// they are; a limited level's zero shares refused, as kube 1.33's strategy still does): the type its
/// name allows, the configuration of that type alone, and the mandatory levels' fixed specs. Its
/// status is its subresource's to check.
pub(super) fn priority_level_configuration(obj: &Value, causes: &mut Vec<Cause>) {
    let name = meta::meta_str(obj, "name").unwrap_or_default();
    let spec = &obj["spec"];
    let kind = text(spec, "type");
    if (name == "exempt") != (kind == "Exempt") {
        invalid(
            causes,
            "spec.type".into(),
            format!("{kind:?}"),
            "type must be 'Exempt' if and only if name is 'exempt'",
        );
    }
    match kind {
        "Exempt" => {
            if set(spec, "limited") {
                forbidden(causes, "spec.limited", "must be nil if the type is not Limited");
            }
            if set(spec, "exempt") {
                exempt_level(&spec["exempt"], causes);
            }
        }
        "Limited" => {
            if set(spec, "exempt") {
                forbidden(causes, "spec.exempt", "must be nil if the type is Limited");
            }
            if set(spec, "limited") {
                limited_level(&spec["limited"], causes);
            } else {
                required_why(causes, "spec.limited", "must not be empty when type is Limited");
            }
        }
        _ => not_supported(causes, "spec.type".into(), &Value::String(kind.into()), &["Exempt", "Limited"]),
    }
    if let Some(fixed) = mandatory_level(name) {
        let mut have = spec.clone();
        if let (true, Some(m)) = (name == "exempt", have.as_object_mut()) {
            m.remove("exempt");
        }
        if semantic(&have) != semantic(&fixed) {
            let why = match name {
                "exempt" => "spec of 'exempt' except the 'spec.exempt' field must equal the fixed value".to_string(),
                _ => format!("spec of '{name}' must equal the fixed value"),
            };
            invalid(causes, "spec".into(), spec.to_string(), &why);
        }
    }
}

fn lendable_percent(level: &Value, at: &str, causes: &mut Vec<Cause>) {
    if let Some(n) = level["lendablePercent"].as_i64().filter(|n| !(0..=100).contains(n)) {
        invalid(causes, format!("{at}.lendablePercent"), n.to_string(), "must be between 0 and 100, inclusive");
    }
}

/// kube's `ValidateExemptPriorityLevelConfiguration`.
fn exempt_level(exempt: &Value, causes: &mut Vec<Cause>) {
    if let Some(n) = exempt["nominalConcurrencyShares"].as_i64().filter(|n| *n < 0) {
        invalid(causes, "spec.exempt.nominalConcurrencyShares".into(), n.to_string(), "must be a non-negative integer");
    }
    lendable_percent(exempt, "spec.exempt", causes);
}

/// kube's `ValidateLimitedPriorityLevelConfiguration`.
fn limited_level(limited: &Value, causes: &mut Vec<Cause>) {
    let shares = limited["nominalConcurrencyShares"].as_i64().unwrap_or_default();
    if shares <= 0 {
        invalid(causes, "spec.limited.nominalConcurrencyShares".into(), shares.to_string(), "must be positive");
    }
    limit_response(&limited["limitResponse"], causes);
    lendable_percent(limited, "spec.limited", causes);
    if let Some(n) = limited["borrowingLimitPercent"].as_i64().filter(|n| *n < 0) {
        let why = "if specified, must be a non-negative integer";
        invalid(causes, "spec.limited.borrowingLimitPercent".into(), n.to_string(), why);
    }
}

/// kube's `ValidateLimitResponse`: queues only for a level that queues.
fn limit_response(response: &Value, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.limited.limitResponse";
    match text(response, "type") {
        "Reject" => {
            if set(response, "queuing") {
                forbidden(causes, &format!("{AT}.queuing"), "must be nil if limited.limitResponse.type is not Limited");
            }
        }
        "Queue" => {
            if set(response, "queuing") {
                queuing(&response["queuing"], causes);
            } else {
                let why = "must not be empty if limited.limitResponse.type is Limited";
                required_why(causes, &format!("{AT}.queuing"), why);
            }
        }
        other => not_supported(causes, format!("{AT}.type"), &Value::String(other.into()), &["Queue", "Reject"]),
    }
}

/// kube's `ValidatePriorityLevelQueuingConfiguration`: positive sizes, a hand no bigger than the deck,
/// and a deal that fits the hash (kube's `shufflesharding.RequiredEntropyBits`).
fn queuing(q: &Value, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.limited.limitResponse.queuing";
    let field = |f: &str| format!("{AT}.{f}");
    let n = |f: &str| q[f].as_i64().unwrap_or_default();
    let (limit, queues, hand) = (n("queueLengthLimit"), n("queues"), n("handSize"));
    if limit <= 0 {
        invalid(causes, field("queueLengthLimit"), limit.to_string(), "must be positive");
    }
    if queues <= 0 {
        invalid(causes, field("queues"), queues.to_string(), "must be positive");
    } else if queues > MAX_QUEUES {
        invalid(causes, field("queues"), queues.to_string(), &format!("must not be greater than {MAX_QUEUES}"));
    }
    if hand <= 0 {
        invalid(causes, field("handSize"), hand.to_string(), "must be positive");
    } else if hand > queues {
        invalid(causes, field("handSize"), hand.to_string(), &format!("should not be greater than queues ({queues})"));
    } else if ((queues as f64).log2() * hand as f64).ceil() as i64 > MAX_HASH_BITS {
        let why = format!(
            "required entropy bits of deckSize {queues} and handSize {hand} should not be greater than {MAX_HASH_BITS}"
        );
        invalid(causes, field("handSize"), hand.to_string(), &why);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(check: fn(&Value, &mut Vec<Cause>), name: &str, spec: Value) -> Vec<String> {
        super::super::testing::check(check, json!({"metadata": {"name": name}, "spec": spec}))
    }

    #[test]
    fn a_flow_schema_is_checked() {
        let ok = json!({"priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 1000,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "ServiceAccount", "serviceAccount": {"name": "*", "namespace": "kube-system"}},
                    {"kind": "Group", "group": {"name": "system:authenticated"}}],
                "resourceRules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "namespaces": ["default"]},
                    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["/healthz", "/apis/*", "/"]}]}]});
        assert_eq!(messages(flow_schema, "web", ok), Vec::<String>::new());

        let bad = json!({"priorityLevelConfiguration": {"name": ""}, "matchingPrecedence": 1,
            "distinguisherMethod": {"type": "ByPod"},
            "rules": [{"subjects": []},
                {"subjects": [{"kind": "User", "user": {"name": ""}, "group": {"name": "g"}}, {"kind": "Robot"},
                        {"kind": "ServiceAccount", "serviceAccount": {"name": "Bad_Name", "namespace": ""}}, {"kind": "Group"}],
                    "resourceRules": [{"verbs": ["get", "fetch"], "apiGroups": ["*", "apps"], "resources": [],
                        "namespaces": ["a.b"]}],
                    "nonResourceRules": [{"verbs": ["*", "get"], "nonResourceURLs": ["/healthz"]}]}]});
        let subdomain = meta::validate_dns1123_subdomain("Bad_Name").unwrap_err();
        let at = "spec.rules[1]";
        assert_eq!(
            messages(flow_schema, "web", bad),
            [
                "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1".to_string(),
                "spec.distinguisherMethod.type: Unsupported value: flowcontrol.FlowDistinguisherMethod{Type:\"ByPod\"}: supported values: \"ByNamespace\", \"ByUser\"".into(),
                "spec.priorityLevelConfiguration.name: Required value: must reference a priority level".into(),
                "spec.rules[0].subjects: Required value: subjects must contain at least one value".into(),
                "spec.rules[0]: Required value: at least one of resourceRules and nonResourceRules has to be non-empty".into(),
                format!("{at}.subjects[0].user.name: Required value"),
                format!("{at}.subjects[0].group: Forbidden: group is forbidden when subject kind is not 'Group'"),
                format!("{at}.subjects[1].kind: Unsupported value: \"Robot\": supported values: \"Group\", \"ServiceAccount\", \"User\""),
                format!("{at}.subjects[2].serviceAccount.name: Invalid value: \"Bad_Name\": {subdomain}"),
                format!("{at}.subjects[2].serviceAccount.namespace: Required value: must specify namespace for service account"),
                format!("{at}.subjects[3].group: Required value: group is required when subject kind is 'Group'"),
                format!("{at}.resourceRules[0].verbs: Unsupported value: []string{{\"get\", \"fetch\"}}: supported values: \"create\", \"delete\", \"deletecollection\", \"get\", \"list\", \"patch\", \"proxy\", \"update\", \"watch\""),
                format!("{at}.resourceRules[0].apiGroups: Invalid value: []string{{\"*\", \"apps\"}}: if '*' is present, must not specify other api groups"),
                format!("{at}.resourceRules[0].resources: Required value: resource rules must supply at least one resource"),
                format!("{at}.resourceRules[0].namespaces[0]: Invalid value: \"a.b\": each member of this list must be '*' or a DNS-1123 label; must not contain dots"),
                format!("{at}.nonResourceRules[0].verbs: Invalid value: []string{{\"*\", \"get\"}}: if '*' is present, must not specify other verbs"),
            ]
        );
        let urls = json!({"priorityLevelConfiguration": {"name": "p"}, "matchingPrecedence": 500,
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "u"}}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["healthz", "/a//b", "/a*", "/a b", ""]}],
                "resourceRules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]}]});
        let at = "spec.rules[0]";
        assert_eq!(
            messages(flow_schema, "web", urls),
            [
                format!("{at}.resourceRules[0].namespaces: Required value: resource rules that are not cluster scoped must supply at least one namespace"),
                format!("{at}.nonResourceRules[0].nonResourceURLs[0]: Invalid value: \"healthz\": must start with slash"),
                format!("{at}.nonResourceRules[0].nonResourceURLs[1]: Invalid value: \"/a//b\": must not contain double slash"),
                format!("{at}.nonResourceRules[0].nonResourceURLs[2]: Invalid value: \"/a*\": wildcard can only do suffix matching"),
                format!("{at}.nonResourceRules[0].nonResourceURLs[3]: Invalid value: \"/a b\": must not contain white-space"),
                format!("{at}.nonResourceRules[0].nonResourceURLs[4]: Invalid value: \"\": must not be empty"),
            ]
        );
        let far = json!({"priorityLevelConfiguration": {"name": "P"}, "matchingPrecedence": 10001});
        let got = messages(flow_schema, "web", far);
        assert_eq!(got[0], "spec.matchingPrecedence: Invalid value: 10001: must not be greater than 10000");
        assert!(got[1]
            .starts_with("spec.priorityLevelConfiguration.name: Invalid value: \"P\": a lowercase RFC 1123 subdomain"));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn the_mandatory_flow_schemas_are_fixed() {
        for name in ["exempt", "catch-all"] {
            let mut fixed = mandatory_flow_schema(name).unwrap();
            // Zero values a client may spell out.
            fixed["rules"][0]["resourceRules"][0]["extra"] = Value::Null;
            fixed["rules"][0]["nonResourceRules"][0]["namespaces"] = json!([]);
            assert_eq!(messages(flow_schema, name, fixed), Vec::<String>::new(), "{name}");
        }
        let mut changed = mandatory_flow_schema("catch-all").unwrap();
        changed["rules"][0]["subjects"] = json!([{"kind": "Group", "group": {"name": "system:authenticated"}}]);
        let got = messages(flow_schema, "catch-all", changed);
        assert_eq!(got.len(), 1);
        assert!(got[0].starts_with("spec: Invalid value: {"), "{got:?}");
        assert!(got[0].ends_with("}: spec of 'catch-all' must equal the fixed value"), "{got:?}");
    }

    fn limited(queuing: Value) -> Value {
        json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 30, "lendablePercent": 0,
            "limitResponse": {"type": "Queue", "queuing": queuing}}})
    }

    #[test]
    fn a_priority_level_is_checked() {
        let ok = limited(json!({"queues": 64, "handSize": 8, "queueLengthLimit": 50}));
        assert_eq!(messages(priority_level_configuration, "workload", ok), Vec::<String>::new());
        let exempt = json!({"type": "Exempt", "exempt": {"nominalConcurrencyShares": 10, "lendablePercent": 20}});
        assert_eq!(messages(priority_level_configuration, "exempt", exempt), Vec::<String>::new());
        let catch_all = mandatory_level("catch-all").unwrap();
        assert_eq!(messages(priority_level_configuration, "catch-all", catch_all), Vec::<String>::new());

        let bad = json!({"type": "Limited", "exempt": {}, "limited": {"nominalConcurrencyShares": 0,
            "lendablePercent": 101, "borrowingLimitPercent": -1,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 9, "queueLengthLimit": -1}}}});
        let q = "spec.limited.limitResponse.queuing";
        assert_eq!(
            messages(priority_level_configuration, "web", bad),
            [
                "spec.exempt: Forbidden: must be nil if the type is Limited".to_string(),
                "spec.limited.nominalConcurrencyShares: Invalid value: 0: must be positive".into(),
                format!("{q}.queueLengthLimit: Invalid value: -1: must be positive"),
                format!("{q}.handSize: Invalid value: 9: required entropy bits of deckSize 128 and handSize 9 should not be greater than 60"),
                "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, inclusive".into(),
                "spec.limited.borrowingLimitPercent: Invalid value: -1: if specified, must be a non-negative integer".into(),
            ]
        );
        let big_hand = limited(json!({"queues": 4, "handSize": 8, "queueLengthLimit": 50}));
        assert_eq!(
            messages(priority_level_configuration, "web", big_hand),
            [format!("{q}.handSize: Invalid value: 8: should not be greater than queues (4)")]
        );
        let reject = json!({"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "lendablePercent": 0,
            "limitResponse": {"type": "Reject", "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 1}}}});
        assert_eq!(
            messages(priority_level_configuration, "web", reject),
            ["spec.limited.limitResponse.queuing: Forbidden: must be nil if limited.limitResponse.type is not Limited"]
        );
        assert_eq!(
            messages(priority_level_configuration, "web", json!({"type": "Limited"})),
            ["spec.limited: Required value: must not be empty when type is Limited"]
        );
        assert_eq!(
            messages(priority_level_configuration, "web", json!({})),
            ["spec.type: Unsupported value: \"\": supported values: \"Exempt\", \"Limited\""]
        );
        assert_eq!(
            messages(priority_level_configuration, "web", json!({"type": "Exempt", "limited": {}})),
            [
                "spec.type: Invalid value: \"Exempt\": type must be 'Exempt' if and only if name is 'exempt'",
                "spec.limited: Forbidden: must be nil if the type is not Limited",
            ]
        );
    }

    #[test]
    fn the_mandatory_levels_are_fixed() {
        let got = messages(priority_level_configuration, "exempt", mandatory_level("catch-all").unwrap());
        assert_eq!(
            got[0],
            "spec.type: Invalid value: \"Limited\": type must be 'Exempt' if and only if name is 'exempt'"
        );
        assert!(got[1].ends_with("}: spec of 'exempt' except the 'spec.exempt' field must equal the fixed value"));
        assert_eq!(got.len(), 2);
        let mut more = mandatory_level("catch-all").unwrap();
        more["limited"]["nominalConcurrencyShares"] = json!(10);
        let got = messages(priority_level_configuration, "catch-all", more);
        assert_eq!(got.len(), 1);
        assert!(
            got[0].starts_with("spec: Invalid value: {")
                && got[0].ends_with("}: spec of 'catch-all' must equal the fixed value")
        );
    }

    #[test]
    fn dns_names_are_worded_as_kube_words_them() {
        assert_eq!(dns1123_label_errors("a.b"), ["must not contain dots"]);
        assert_eq!(dns1123_label_errors("ok-1"), Vec::<String>::new());
        let long = "A".repeat(64);
        let got = dns1123_label_errors(&long);
        assert_eq!(got[0], "must be no more than 63 characters");
        assert!(got[1].starts_with("a lowercase RFC 1123 label"));
        assert!(dns1123_subdomain_errors("")[0].starts_with("a lowercase RFC 1123 subdomain"));
        assert!(VERBS.windows(2).all(|w| w[0] < w[1]));
    }
}
