//! ValidatingAdmissionPolicies and their bindings as kube 1.33 checks them
//! (`pkg/apis/admissionregistration/validation`): what a policy matches, its parameters' kind, its
//! validations and audit annotations, and a binding's policy, parameters and actions. kgate stores
//! policies and enforces none.
//!
//! Not compiled: kgate stores CEL and runs none, so kube's compilation and type checks of match
//! conditions, variables, validations, message expressions and audit annotation values (with their cost
//! limits) are not made; what needs no compiler (present, trimmed, named, unique, short enough) is.

use super::*;

/// The reasons a validation may deny with (kube's `supportedValidationPolicyReason`, sorted).
const REASONS: &[&str] = &["Forbidden", "Invalid", "RequestEntityTooLarge"];
/// kube's `maxAuditAnnotations`.
const MAX_AUDIT_ANNOTATIONS: usize = 20;
/// kube's `maxAuditAnnotationValueExpressionLength`: below the 10 KiB an annotation's value may have,
/// as concatenations grow.
const MAX_VALUE_EXPRESSION: usize = 5 * 1024;
const EXCLUSIVE: &str = "name and selector are mutually exclusive";

fn present<'a>(v: &'a Value, field: &str) -> Option<&'a Value> {
    v.get(field).filter(|f| !f.is_null())
}

/// An enum kube holds by a pointer and requires (defaults set it): absent is Required, anything not
/// listed, `""` too, NotSupported (where `one_of_at` takes `""` as absent).
fn required_one_of(v: &Value, field: &str, at: &str, supported: &[&str], causes: &mut Vec<Cause>) {
    let place = format!("{at}.{field}");
    match present(v, field) {
        None => required(causes, place),
        Some(s) if s.as_str().is_some_and(|s| supported.contains(&s)) => {}
        Some(s) => not_supported(causes, place, s, supported),
    }
}

/// apimachinery's `IsValidPathSegmentName`: every forbidden character its own error, an empty name
/// none.
fn path_segment_errors(name: &str) -> Vec<String> {
    if name == "." || name == ".." {
        return vec![format!("may not be '{name}'")];
    }
    ["/", "%"].iter().filter(|c| name.contains(**c)).map(|c| format!("may not contain '{c}'")).collect()
}

/// kube's `ValidateLabelSelector` (strict: values checked as label values) at `at`: the shared check
/// makes paths only along the schema walk, which these kinds are checked without.
fn selector_at(selector: &Value, at: &str, causes: &mut Vec<Cause>) {
    let Some(map) = selector.as_object() else { return };
    under(at, causes, |found| label_selector(map, &Path::default(), found));
}

/// A ValidatingAdmissionPolicy (kube's `ValidateValidatingAdmissionPolicy`, its spec by
/// `validateValidatingAdmissionPolicySpec`). kube's update check is this one with unchanged match
/// conditions and stored expressions spared, which `errors` does for whatever the old object broke.
pub(super) fn validating_admission_policy(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = &obj["spec"];
    required_one_of(spec, "failurePolicy", "spec", &["Fail", "Ignore"], causes);
    if let Some(kind) = present(spec, "paramKind") {
        param_kind(kind, causes);
    }
    match present(spec, "matchConstraints") {
        None => required(causes, "spec.matchConstraints".into()),
        Some(constraints) => {
            match_resources(constraints, "spec.matchConstraints", causes);
            // The rules give the expressions the types they are checked against.
            if list(constraints, "resourceRules").is_empty() {
                required(causes, "spec.matchConstraints.resourceRules".into());
            }
        }
    }
    match_conditions(spec.get("matchConditions"), "spec.matchConditions", causes);
    for (i, v) in list(spec, "variables").iter().enumerate() {
        variable(v, &format!("spec.variables[{i}]"), causes);
    }
    let (validations, annotations) = (list(spec, "validations"), list(spec, "auditAnnotations"));
    if validations.is_empty() && annotations.is_empty() {
        let why = "validations or auditAnnotations must contain at least one item";
        required_why(causes, "spec.validations", why);
        required_why(causes, "spec.auditAnnotations", why);
        return;
    }
    for (i, v) in validations.iter().enumerate() {
        validation(v, &format!("spec.validations[{i}]"), causes);
    }
    let policy = meta::meta_str(obj, "name").unwrap_or_default();
    audit_annotations(annotations, policy, causes);
}

/// The kind of a policy's parameters (kube's `validateParamKind`): its group and version as an
/// APIService's, its kind a DNS-1035 label in any case.
fn param_kind(kind: &Value, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.paramKind";
    let api_version = text(kind, "apiVersion");
    let at = format!("{AT}.apiVersion");
    if api_version.is_empty() {
        required(causes, at);
    } else if api_version.matches('/').count() > 1 {
        let why = format!("unexpected GroupVersion string: {api_version}");
        invalid(causes, at, format!("{api_version:?}"), &why);
    } else {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        if !group.is_empty() {
            for why in meta::dns1123_subdomain_errors(group) {
                invalid(causes, at.clone(), format!("{group:?}"), &why);
            }
        }
        if version.is_empty() {
            invalid(causes, at, format!("{api_version:?}"), "version must be specified");
        } else {
            let errs = meta::dns1035_label_errors(version);
            if !errs.is_empty() {
                invalid(causes, at, format!("{version:?}"), &errs.join(","));
            }
        }
    }
    let name = text(kind, "kind");
    if name.is_empty() {
        return required(causes, format!("{AT}.kind"));
    }
    let errs = meta::dns1035_label_errors(&name.to_lowercase());
    if !errs.is_empty() {
        let why = format!("may have mixed case, but should otherwise match: {}", errs.join(","));
        invalid(causes, format!("{AT}.kind"), format!("{name:?}"), &why);
    }
}

/// What a policy or binding applies to (kube's `validateMatchResources`); the selectors are checked
/// strictly, as the type came after kube stopped accepting bad label values in selectors.
fn match_resources(resources: &Value, at: &str, causes: &mut Vec<Cause>) {
    required_one_of(resources, "matchPolicy", at, &["Equivalent", "Exact"], causes);
    for field in ["namespaceSelector", "objectSelector"] {
        match present(resources, field) {
            None => required(causes, format!("{at}.{field}")),
            Some(s) => selector_at(s, &format!("{at}.{field}"), causes),
        }
    }
    for field in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in list(resources, field).iter().enumerate() {
            named_rule(rule, &format!("{at}.{field}[{i}]"), causes);
        }
    }
}

/// kube's `validateNamedRuleWithOperations`: names that are path segments, each once, and the rule.
fn named_rule(rule: &Value, at: &str, causes: &mut Vec<Cause>) {
    let mut names = HashSet::new();
    for (j, n) in list(rule, "resourceNames").iter().enumerate() {
        let name = n.as_str().unwrap_or_default();
        let here = format!("{at}.resourceNames[{j}]");
        for why in path_segment_errors(name) {
            invalid(causes, here.clone(), format!("{name:?}"), &why);
        }
        if !names.insert(name) {
            duplicate(causes, &here, name);
        }
    }
    rule_with_operations(rule, at, causes);
}

/// CEL's identifiers (kube's `isCELIdentifier`): `[_a-zA-Z][_a-zA-Z0-9]*`, no reserved word.
fn cel_identifier(name: &str) -> bool {
    const RESERVED: &[&str] = &[
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ];
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        && !RESERVED.contains(&name)
}

/// kube's `validateVariable`, its expression not compiled.
fn variable(v: &Value, at: &str, causes: &mut Vec<Cause>) {
    let name = text(v, "name");
    if name.trim().is_empty() {
        required_why(causes, &format!("{at}.name"), "name is not specified");
    } else if !cel_identifier(name) {
        invalid(causes, format!("{at}.name"), format!("{name:?}"), "name is not a valid CEL identifier");
    }
    if text(v, "expression").trim().is_empty() {
        required_why(causes, &format!("{at}.expression"), "expression is not specified");
    }
}

/// kube's `validateValidation`, its expressions not compiled. A message must fit a response's line.
fn validation(v: &Value, at: &str, causes: &mut Vec<Cause>) {
    if text(v, "expression").trim().is_empty() {
        required_why(causes, &format!("{at}.expression"), "expression is not specified");
    }
    let message_expression = text(v, "messageExpression");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        let shown = format!("{message_expression:?}");
        invalid(causes, format!("{at}.messageExpression"), shown, "must be non-empty if specified");
    }
    let message = text(v, "message");
    if !message.is_empty() && message.trim().is_empty() {
        invalid(causes, format!("{at}.message"), format!("{message:?}"), "message must be non-empty if specified");
    } else if message.trim().contains(['\n', '\r']) {
        invalid(causes, format!("{at}.message"), format!("{message:?}"), "message must not contain line breaks");
    }
    if let Some(reason) = present(v, "reason") {
        if !reason.as_str().is_some_and(|r| REASONS.contains(&r)) {
            not_supported(causes, format!("{at}.reason"), reason, REASONS);
        }
    }
}

/// A policy's audit annotations (kube's `validateAuditAnnotation` and its caller): at most 20, each
/// key unique and, after the policy's name and a `/`, a qualified name (the annotation's key as
/// written), each value expression present and short.
fn audit_annotations(annotations: &[Value], policy: &str, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.auditAnnotations";
    if annotations.len() > MAX_AUDIT_ANNOTATIONS {
        // kube shows the Go slice of structs.
        let items: Vec<String> = annotations
            .iter()
            .map(|a| {
                let (key, value) = (text(a, "key"), text(a, "valueExpression"));
                format!("admissionregistration.AuditAnnotation{{Key:{key:?}, ValueExpression:{value:?}}}")
            })
            .collect();
        let shown = format!("[]admissionregistration.AuditAnnotation{{{}}}", items.join(", "));
        let why = format!("must not have more than {MAX_AUDIT_ANNOTATIONS} auditAnnotations");
        invalid(causes, AT.into(), shown, &why);
    }
    let mut keys = HashSet::new();
    for (i, a) in annotations.iter().enumerate() {
        let here = format!("{AT}[{i}]");
        let key = text(a, "key");
        if policy.is_empty() {
            invalid(causes, format!("{here}.key"), format!("{key:?}"), "requires metadata.name be non-empty");
        } else {
            let full = format!("{policy}/{key}");
            for why in meta::qualified_name_errors(&full) {
                invalid(causes, format!("{here}.key"), format!("{full:?}"), &why);
            }
        }
        let value = text(a, "valueExpression").trim();
        if value.is_empty() {
            required_why(causes, &format!("{here}.valueExpression"), "valueExpression is not specified");
        } else if value.len() > MAX_VALUE_EXPRESSION {
            // kube words a length as a Required value here.
            let why = format!("must not exceed {MAX_VALUE_EXPRESSION} bytes in length");
            required_why(causes, &format!("{here}.valueExpression"), &why);
        }
        if !keys.insert(key) {
            duplicate(causes, &format!("{here}.key"), key);
        }
    }
}

/// A ValidatingAdmissionPolicyBinding (kube's `ValidateValidatingAdmissionPolicyBinding`; its update
/// check is the same).
pub(super) fn validating_admission_policy_binding(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = &obj["spec"];
    match text(spec, "policyName") {
        "" => required(causes, "spec.policyName".into()),
        name => {
            for why in meta::dns1123_subdomain_errors(name) {
                invalid(causes, "spec.policyName".into(), format!("{name:?}"), &why);
            }
        }
    }
    if let Some(param_ref) = present(spec, "paramRef") {
        parameters(param_ref, causes);
    }
    if let Some(resources) = present(spec, "matchResources") {
        match_resources(resources, "spec.matchResources", causes);
    }
    validation_actions(list(spec, "validationActions"), causes);
}

/// kube's `validateParamRef`: a name or a selector, not both, and what to do when none is found.
fn parameters(param_ref: &Value, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.paramRef";
    let name = text(param_ref, "name");
    let selector = present(param_ref, "selector");
    if !name.is_empty() {
        for why in path_segment_errors(name) {
            invalid(causes, format!("{AT}.name"), format!("{name:?}"), &why);
        }
        if selector.is_some() {
            forbidden(causes, &format!("{AT}.name"), EXCLUSIVE);
        }
    }
    if let Some(selector) = selector {
        selector_at(selector, &format!("{AT}.selector"), causes);
        if !name.is_empty() {
            forbidden(causes, &format!("{AT}.selector"), EXCLUSIVE);
        }
    }
    if name.is_empty() && selector.is_none() {
        required_why(causes, AT, "one of name or selector must be specified");
    }
    let at = format!("{AT}.parameterNotFoundAction");
    match present(param_ref, "parameterNotFoundAction") {
        None => required(causes, at),
        Some(Value::String(s)) if s.is_empty() => required(causes, at),
        Some(a) if a.as_str().is_some_and(|a| a == "Deny" || a == "Allow") => {}
        // kube lists these two unsorted.
        Some(a) => not_supported(causes, at, a, &["Deny", "Allow"]),
    }
}

/// kube's `validateValidationActions`: at least one, each known and once, and not both Deny and Warn
/// (a failure would be told twice, in the response and in its warnings).
fn validation_actions(actions: &[Value], causes: &mut Vec<Cause>) {
    const AT: &str = "spec.validationActions";
    const ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
    let mut seen = HashSet::new();
    for (i, a) in actions.iter().enumerate() {
        if !a.as_str().is_some_and(|a| ACTIONS.contains(&a)) {
            not_supported(causes, format!("{AT}[{i}]"), a, ACTIONS);
        }
        let action = a.as_str().unwrap_or_default();
        if !seen.insert(action) {
            duplicate(causes, &format!("{AT}[{i}]"), action);
        }
    }
    if seen.contains("Deny") && seen.contains("Warn") {
        let why = "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)";
        invalid(causes, AT.into(), go_strings("admissionregistration.ValidationAction", actions), why);
    }
    if seen.is_empty() {
        required_why(causes, AT, "at least one validation action is required");
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::lines;
    use super::*;
    use serde_json::json;

    fn valid_spec() -> Value {
        json!({
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "rules.example.com/v1", "kind": "ReplicaLimit"},
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "In", "values": ["test"]}]},
                "objectSelector": {},
                "resourceRules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["deployments"], "scope": "*"
                }]
            },
            "matchConditions": [{"name": "not-kube-system", "expression": "true"}],
            "variables": [{"name": "replicas", "expression": "object.spec.replicas"}],
            "validations": [{"expression": "variables.replicas <= params.max", "message": "too many", "reason": "Invalid"}],
            "auditAnnotations": [{"key": "high-replica-count", "valueExpression": "'high'"}]
        })
    }

    fn policy(spec: Value) -> Vec<String> {
        let mut causes = Vec::new();
        validating_admission_policy(&json!({"metadata": {"name": "demo"}, "spec": spec}), &mut causes);
        lines(causes)
    }

    fn binding(spec: Value) -> Vec<String> {
        let mut causes = Vec::new();
        validating_admission_policy_binding(&json!({"metadata": {"name": "demo-binding"}, "spec": spec}), &mut causes);
        lines(causes)
    }

    #[test]
    fn a_valid_policy_passes() {
        assert_eq!(policy(valid_spec()), Vec::<String>::new());
    }

    #[test]
    fn failure_policy_and_match_constraints() {
        let mut spec = valid_spec();
        spec["failurePolicy"] = json!("Sometimes");
        spec.as_object_mut().unwrap().remove("matchConstraints");
        assert_eq!(
            policy(spec),
            [
                r#"spec.failurePolicy: Unsupported value: "Sometimes": supported values: "Fail", "Ignore""#,
                "spec.matchConstraints: Required value",
            ]
        );
        let mut spec = valid_spec();
        spec["matchConstraints"] = json!({
            "matchPolicy": "",
            "namespaceSelector": {"matchExpressions": [{"key": "env", "operator": "Is"}]},
            "resourceRules": []
        });
        assert_eq!(
            policy(spec),
            [
                r#"spec.matchConstraints.matchPolicy: Unsupported value: "": supported values: "Equivalent", "Exact""#,
                r#"spec.matchConstraints.namespaceSelector.matchExpressions[0].operator: Invalid value: "Is": not a valid selector operator"#,
                "spec.matchConstraints.objectSelector: Required value",
                "spec.matchConstraints.resourceRules: Required value",
            ]
        );
    }

    #[test]
    fn resource_rules() {
        let mut spec = valid_spec();
        spec["matchConstraints"]["resourceRules"][0]["resourceNames"] = json!(["a/b%", "x", "x", ".."]);
        spec["matchConstraints"]["excludeResourceRules"] = json!([{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["PATCH"], "resources": ["pods/*", "pods/log"]
        }]);
        let names = "spec.matchConstraints.resourceRules[0].resourceNames";
        let exclude = "spec.matchConstraints.excludeResourceRules[0]";
        assert_eq!(
            policy(spec),
            [
                format!(r#"{names}[0]: Invalid value: "a/b%": may not contain '/'"#),
                format!(r#"{names}[0]: Invalid value: "a/b%": may not contain '%'"#),
                format!(r#"{names}[2]: Duplicate value: "x""#),
                format!(r#"{names}[3]: Invalid value: "..": may not be '..'"#),
                format!(
                    r#"{exclude}.operations[0]: Unsupported value: "PATCH": supported values: "*", "CONNECT", "CREATE", "DELETE", "UPDATE""#
                ),
                format!(
                    r#"{exclude}.resources[1]: Invalid value: "pods/log": if 'pods/*' is present, must not specify pods/log"#
                ),
            ]
        );
    }

    #[test]
    fn param_kinds() {
        let mut spec = valid_spec();
        spec["paramKind"] = json!({"apiVersion": "a/b/c", "kind": "Replica_Limit"});
        let errs = policy(spec);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert_eq!(
            errs[0],
            r#"spec.paramKind.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#
        );
        assert!(errs[1].starts_with(
            r#"spec.paramKind.kind: Invalid value: "Replica_Limit": may have mixed case, but should otherwise match: a DNS-1035 label"#
        ));
        let mut spec = valid_spec();
        spec["paramKind"] = json!({"apiVersion": "Example.com/", "kind": "Limit"});
        let errs = policy(spec);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs[0]
            .starts_with(r#"spec.paramKind.apiVersion: Invalid value: "Example.com": a lowercase RFC 1123 subdomain"#));
        assert_eq!(errs[1], r#"spec.paramKind.apiVersion: Invalid value: "Example.com/": version must be specified"#);
        let mut spec = valid_spec();
        spec["paramKind"] = json!({});
        assert_eq!(policy(spec), ["spec.paramKind.apiVersion: Required value", "spec.paramKind.kind: Required value"]);
    }

    #[test]
    fn variables_validations_and_match_conditions() {
        let mut spec = valid_spec();
        spec["variables"] = json!([{"name": "in", "expression": "1"}, {"name": " ", "expression": " "}]);
        spec["validations"] =
            json!([{"expression": " ", "messageExpression": "  ", "message": "two\nlines", "reason": "Teapot"}]);
        assert_eq!(
            policy(spec),
            [
                r#"spec.variables[0].name: Invalid value: "in": name is not a valid CEL identifier"#,
                "spec.variables[1].name: Required value: name is not specified",
                "spec.variables[1].expression: Required value: expression is not specified",
                "spec.validations[0].expression: Required value: expression is not specified",
                r#"spec.validations[0].messageExpression: Invalid value: "  ": must be non-empty if specified"#,
                r#"spec.validations[0].message: Invalid value: "two\nlines": message must not contain line breaks"#,
                r#"spec.validations[0].reason: Unsupported value: "Teapot": supported values: "Forbidden", "Invalid", "RequestEntityTooLarge""#,
            ]
        );
        let mut spec = valid_spec();
        spec["matchConditions"] = json!([{"name": "a", "expression": "true"}, {"name": "a", "expression": ""}]);
        let errs = policy(spec);
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(errs.contains(&r#"spec.matchConditions[1].name: Duplicate value: "a""#.to_string()));
        assert!(errs.contains(&"spec.matchConditions[1].expression: Required value".to_string()));
    }

    #[test]
    fn validations_or_audit_annotations() {
        let mut spec = valid_spec();
        spec.as_object_mut().unwrap().remove("validations");
        spec["auditAnnotations"] = json!([]);
        let why = "Required value: validations or auditAnnotations must contain at least one item";
        assert_eq!(policy(spec), [format!("spec.validations: {why}"), format!("spec.auditAnnotations: {why}")]);
        let mut spec = valid_spec();
        spec["auditAnnotations"] = json!([
            {"key": "k", "valueExpression": "'a'"},
            {"key": "k", "valueExpression": " "},
            {"key": "a b", "valueExpression": "'x'"}
        ]);
        let errs = policy(spec);
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert_eq!(
            errs[0],
            "spec.auditAnnotations[1].valueExpression: Required value: valueExpression is not specified"
        );
        assert_eq!(errs[1], r#"spec.auditAnnotations[1].key: Duplicate value: "k""#);
        assert!(errs[2]
            .starts_with(r#"spec.auditAnnotations[2].key: Invalid value: "demo/a b": name part must consist of"#));
        let mut spec = valid_spec();
        spec["auditAnnotations"] = (0..21).map(|i| json!({"key": format!("k{i}"), "valueExpression": "'v'"})).collect();
        let errs = policy(spec);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(errs[0].starts_with(
            r#"spec.auditAnnotations: Invalid value: []admissionregistration.AuditAnnotation{admissionregistration.AuditAnnotation{Key:"k0", ValueExpression:"'v'"}, "#
        ));
        assert!(errs[0].ends_with("}: must not have more than 20 auditAnnotations"));
    }

    #[test]
    fn a_valid_binding_passes() {
        let spec = json!({
            "policyName": "demo",
            "validationActions": ["Deny", "Audit"],
            "paramRef": {"name": "limits", "namespace": "default", "parameterNotFoundAction": "Deny"},
            "matchResources": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {"matchLabels": {"env": "test"}},
                "objectSelector": {},
                "resourceRules": [{
                    "apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["*"],
                    "resources": ["deployments"], "resourceNames": ["web"]
                }]
            }
        });
        assert_eq!(binding(spec), Vec::<String>::new());
    }

    #[test]
    fn binding_policy_name_and_actions() {
        assert_eq!(
            binding(json!({})),
            [
                "spec.policyName: Required value",
                "spec.validationActions: Required value: at least one validation action is required"
            ]
        );
        let errs = binding(json!({"policyName": "Bad_Name", "validationActions": ["Deny", "Warn", "Warn", "Block"]}));
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert!(errs[0].starts_with(r#"spec.policyName: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain"#));
        assert_eq!(
            errs[1..],
            [
                r#"spec.validationActions[2]: Duplicate value: "Warn""#,
                r#"spec.validationActions[3]: Unsupported value: "Block": supported values: "Audit", "Deny", "Warn""#,
                r#"spec.validationActions: Invalid value: []admissionregistration.ValidationAction{"Deny", "Warn", "Warn", "Block"}: must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)"#,
            ]
        );
    }

    #[test]
    fn binding_param_ref_and_match_resources() {
        let errs = binding(json!({
            "policyName": "demo", "validationActions": ["Audit"],
            "paramRef": {"name": "p", "selector": {"matchLabels": {"bad key!": "v"}}}
        }));
        assert_eq!(errs.len(), 4, "{errs:?}");
        assert_eq!(errs[0], "spec.paramRef.name: Forbidden: name and selector are mutually exclusive");
        assert!(errs[1].starts_with(
            r#"spec.paramRef.selector.matchLabels: Invalid value: "bad key!": name part must consist of"#
        ));
        assert_eq!(errs[2], "spec.paramRef.selector: Forbidden: name and selector are mutually exclusive");
        assert_eq!(errs[3], "spec.paramRef.parameterNotFoundAction: Required value");
        assert_eq!(
            binding(json!({
                "policyName": "demo", "validationActions": ["Audit"],
                "paramRef": {"parameterNotFoundAction": "Ignore"},
                "matchResources": {"matchPolicy": "Sometimes"}
            })),
            [
                "spec.paramRef: Required value: one of name or selector must be specified",
                r#"spec.paramRef.parameterNotFoundAction: Unsupported value: "Ignore": supported values: "Deny", "Allow""#,
                r#"spec.matchResources.matchPolicy: Unsupported value: "Sometimes": supported values: "Equivalent", "Exact""#,
                "spec.matchResources.namespaceSelector: Required value",
                "spec.matchResources.objectSelector: Required value",
            ]
        );
    }
}
