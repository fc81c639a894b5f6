//! What a namespace may hold and what its pods get by default, as kube checks it: ResourceQuotas
//! (names of resources kube counts, amounts not below zero and whole where they count things, scopes
//! that apply to what is counted) and LimitRanges (known types, and minimum, defaults and maximum in
//! that order). kgate enforces both, so what it enforces must make sense.
//!
//! kube shows a refused amount as its Go struct; kgate shows the amount as written.

use super::*;

/// Resource names kube knows (`IsStandardResourceName`) that are amounts: with `COUNTED`, and
/// hugepages, every standard name.
const AMOUNTS: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "storage",
    "requests.storage",
];

/// Standard resources counted in whole units (`IsIntegerResourceName`), extended resources aside.
const COUNTED: &[&str] = &[
    "pods",
    "resourcequotas",
    "services",
    "replicationcontrollers",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
    "services.nodeports",
    "services.loadbalancers",
];

/// The scopes a quota may have, and the standard resources each may be applied to (`None`: any).
const SCOPES: &[(&str, Option<&[&str]>)] = &[
    ("Terminating", Some(POD_RESOURCES)),
    ("NotTerminating", Some(POD_RESOURCES)),
    ("BestEffort", Some(&["pods"])),
    ("NotBestEffort", Some(POD_RESOURCES)),
    ("PriorityClass", Some(POD_RESOURCES)),
    ("VolumeAttributesClass", Some(&["persistentvolumeclaims", "requests.storage"])),
    ("CrossNamespacePodAffinity", Some(POD_RESOURCES)),
];

const POD_RESOURCES: &[&str] =
    &["pods", "cpu", "memory", "limits.cpu", "limits.memory", "requests.cpu", "requests.memory"];

fn standard(name: &str) -> bool {
    AMOUNTS.contains(&name)
        || COUNTED.contains(&name)
        || name.starts_with("hugepages-")
        || name.starts_with("requests.hugepages-")
}

fn standard_for_quota(name: &str) -> bool {
    standard(name) && name != "storage"
}

/// An extended resource (`IsExtendedResourceName`): domain-qualified outside kubernetes.io.
fn extended(name: &str) -> bool {
    name.contains('/')
        && !name.contains("kubernetes.io/")
        && !name.starts_with("requests.")
        && meta::qualified_name_errors(&format!("requests.{name}")).is_empty()
}

/// A resource's name (kube's `validateResourceName`): a qualified name, standard unless it is fully
/// qualified. kube shows a resource name unquoted.
pub(super) fn resource_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    let errors = meta::qualified_name_errors(name);
    let qualified = errors.is_empty();
    for why in errors {
        invalid(causes, at.to_string(), name.to_string(), &why);
    }
    if qualified && !name.contains('/') && !standard(name) {
        invalid(causes, at.to_string(), name.to_string(), "must be a standard resource type or fully qualified");
    }
}

/// A container's resource name (kube's `validateContainerResourceName`).
pub(super) fn container_resource_name(name: &str, at: &str, causes: &mut Vec<Cause>) {
    resource_name(name, at, causes);
    let own = matches!(name, "cpu" | "memory" | "ephemeral-storage") || name.starts_with("hugepages-");
    if !name.contains('/') && !own {
        invalid(causes, at.to_string(), name.to_string(), "must be a standard resource for containers");
    } else if name.contains('/') && !name.contains("kubernetes.io/") && !extended(name) {
        invalid(causes, at.to_string(), name.to_string(), "doesn't follow extended resource name standard");
    }
}

fn zero() -> Value {
    Value::String("0".into())
}

fn text(q: &Value) -> String {
    q.as_str().map_or_else(|| q.to_string(), |s| s.trim().to_string())
}

/// Go's `%#v` of a list of scopes.
fn shown_scopes(scopes: &[Value]) -> String {
    match scopes {
        [] => "[]core.ResourceQuotaScope(nil)".into(),
        _ => format!("[]core.ResourceQuotaScope{{{}}}", scopes.iter().map(shown).collect::<Vec<_>>().join(", ")),
    }
}

/// A ResourceQuota's spec (kube's `ValidateResourceQuotaSpec`).
pub(super) fn quota(spec: &Value, causes: &mut Vec<Cause>) {
    let hard = spec["hard"].as_object();
    for (name, q) in hard.into_iter().flatten() {
        let at = format!("spec.hard[{name}]");
        resource_name(name, &at, causes);
        if !name.contains('/') && !standard_for_quota(name) {
            invalid(causes, at.clone(), name.clone(), "must be a standard resource for quota");
        }
        let order = crate::registry::quantity::compare(q, &zero());
        if order.is_some_and(|o| o.is_lt()) {
            invalid(causes, at.clone(), format!("{:?}", text(q)), "must be greater than or equal to 0");
        }
        let whole = crate::registry::quantity::value(q).is_none_or(|v| v.fract() == 0.0);
        if (COUNTED.contains(&name.as_str()) || extended(name)) && !whole {
            invalid(causes, at, format!("{:?}", text(q)), "must be an integer");
        }
    }
    let counted: Vec<&str> =
        hard.into_iter().flatten().map(|(k, _)| k.as_str()).filter(|k| standard_for_quota(k)).collect();
    let applies = |scope: &str, resource: &str| match SCOPES.iter().find(|(s, _)| *s == scope) {
        Some((_, Some(allowed))) => allowed.contains(&resource),
        _ => true,
    };
    let known = |scope: &str| SCOPES.iter().any(|(s, _)| *s == scope);
    let scopes = spec["scopes"].as_array().map_or(&[][..], Vec::as_slice);
    let names: Vec<&str> = scopes.iter().filter_map(Value::as_str).collect();
    // Shown once, and each scope's error once: kube repeats an error per resource, whose message
    // its aggregate then prints once; a list of many scopes must not make an answer of its square.
    let listed = shown_scopes(scopes);
    for scope in &names {
        if causes.len() >= MAX_CAUSES {
            break;
        }
        if !known(scope) {
            invalid(causes, "spec.scopes".into(), listed.clone(), "unsupported scope");
        }
        if counted.iter().any(|r| !applies(scope, r)) {
            invalid(causes, "spec.scopes".into(), listed.clone(), "unsupported scope applied to resource");
        }
    }
    let conflicts = |names: &[&str]| {
        [("BestEffort", "NotBestEffort"), ("Terminating", "NotTerminating")]
            .iter()
            .filter(|(a, b)| names.contains(a) && names.contains(b))
            .count()
    };
    for _ in 0..conflicts(&names) {
        invalid(causes, "spec.scopes".into(), listed.clone(), "conflicting scopes");
    }
    let Some(selector) = spec.get("scopeSelector").filter(|s| !s.is_null()) else { return };
    const AT: &str = "spec.scopeSelector.matchExpressions";
    let requirements = selector["matchExpressions"].as_array().map_or(&[][..], Vec::as_slice);
    let mut selected = Vec::new();
    let whole = selector.to_string();
    for r in requirements {
        if causes.len() >= MAX_CAUSES {
            break;
        }
        let scope = r["scopeName"].as_str().unwrap_or_default();
        selected.push(scope);
        if !known(scope) {
            invalid(causes, format!("{AT}.scopeName"), format!("{scope:?}"), "unsupported scope");
        }
        if counted.iter().any(|res| !applies(scope, res)) {
            invalid(causes, AT.into(), whole.clone(), "unsupported scope applied to resource");
        }
        let operator = r["operator"].as_str().unwrap_or_default();
        let only_exists = ["BestEffort", "NotBestEffort", "Terminating", "NotTerminating", "CrossNamespacePodAffinity"];
        if only_exists.contains(&scope) && operator != "Exists" {
            let why = "must be 'Exists' when scope is any of ResourceQuotaScopeTerminating, ResourceQuotaScopeNotTerminating, ResourceQuotaScopeBestEffort, ResourceQuotaScopeNotBestEffort or ResourceQuotaScopeCrossNamespacePodAffinity";
            invalid(causes, format!("{AT}.operator"), format!("{operator:?}"), why);
        }
        let values = r["values"].as_array().map_or(&[][..], Vec::as_slice);
        match operator {
            "In" | "NotIn" if values.is_empty() => push(
                causes,
                cause(
                    "FieldValueRequired",
                    &format!("{AT}.values"),
                    "Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector",
                ),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                let shown = format!("[]string{{{}}}", values.iter().map(shown).collect::<Vec<_>>().join(", "));
                let why = "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector";
                invalid(causes, format!("{AT}.values"), shown, why);
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => invalid(causes, format!("{AT}.operator"), format!("{other:?}"), "not a valid selector operator"),
        }
    }
    for _ in 0..conflicts(&selected) {
        invalid(causes, AT.into(), listed.clone(), "conflicting scopes");
    }
}

/// A LimitRange's spec (kube's `ValidateLimitRange`, after v1's defaults have filled a container's
/// default limits and requests from its maximum and minimum).
pub(super) fn limit_range(spec: &Value, causes: &mut Vec<Cause>) {
    let mut types = HashSet::new();
    for (i, item) in spec["limits"].as_array().into_iter().flatten().enumerate() {
        let at = format!("spec.limits[{i}]");
        let kind = item["type"].as_str().unwrap_or_default();
        let type_errors = meta::qualified_name_errors(kind);
        let qualified = type_errors.is_empty();
        for why in type_errors {
            invalid(causes, format!("{at}.type"), format!("{kind:?}"), &why);
        }
        if qualified && !kind.contains('/') && !["Pod", "Container", "PersistentVolumeClaim"].contains(&kind) {
            invalid(
                causes,
                format!("{at}.type"),
                format!("{kind:?}"),
                "must be a standard limit type or fully qualified",
            );
        }
        if !types.insert(kind) {
            duplicate(causes, &format!("{at}.type"), kind);
        }
        let map = |f: &str| item[f].as_object();
        let for_pods = kind == "Pod" || kind == "Container";
        for field in ["max", "min", "default", "defaultRequest", "maxLimitRequestRatio"] {
            for name in map(field).into_iter().flatten().map(|(k, _)| k) {
                let here = format!("{at}.{field}[{name}]");
                if for_pods {
                    container_resource_name(name, &here, causes);
                } else {
                    resource_name(name, &here, causes);
                }
            }
        }
        if kind == "Pod" {
            for field in ["default", "defaultRequest"] {
                if map(field).is_some_and(|m| !m.is_empty()) {
                    forbidden(causes, &format!("{at}.{field}"), "may not be specified when `type` is 'Pod'");
                }
            }
        }
        if kind == "PersistentVolumeClaim"
            && ["min", "max"].iter().all(|f| map(f).is_none_or(|m| !m.contains_key("storage")))
        {
            let why = "Required value: either minimum or maximum storage value is required, but neither was provided";
            push(causes, cause("FieldValueRequired", &format!("{at}.limits"), why));
        }
        let mut names: Vec<&String> = ["max", "min", "default", "defaultRequest", "maxLimitRequestRatio"]
            .iter()
            .flat_map(|f| map(f).into_iter().flatten().map(|(k, _)| k))
            .collect();
        names.sort();
        names.dedup();
        for name in names {
            let get = |f: &str| map(f).and_then(|m| m.get(name.as_str()));
            let (min, max, default, request, ratio) =
                (get("min"), get("max"), get("default"), get("defaultRequest"), get("maxLimitRequestRatio"));
            if kind == "Pod" {
                limit_order(&at, name, min, max, None, None, ratio, causes);
            } else {
                limit_order(&at, name, min, max, default, request, ratio, causes);
            }
        }
    }
}

/// One resource of a LimitRange item: minimum ≤ default request ≤ default ≤ maximum, a ratio of at
/// least 1 and at most maximum over minimum, and a resource that cannot be overcommitted requested at
/// its default.
#[allow(clippy::too_many_arguments)]
fn limit_order(
    at: &str,
    name: &str,
    min: Option<&Value>,
    max: Option<&Value>,
    default: Option<&Value>,
    request: Option<&Value>,
    ratio: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    let above = |a: Option<&Value>, b: Option<&Value>| match (a, b) {
        (Some(a), Some(b)) => crate::registry::quantity::compare(a, b).is_some_and(|o| o.is_gt()),
        _ => false,
    };
    let t = |q: Option<&Value>| q.map(text).unwrap_or_default();
    let mut say = |field: &str, shown_of: Option<&Value>, why: String| {
        invalid(causes, format!("{at}.{field}[{name}]"), format!("{:?}", t(shown_of)), &why);
    };
    if above(min, max) {
        say("min", min, format!("min value {} is greater than max value {}", t(min), t(max)));
    }
    if above(min, request) {
        say(
            "defaultRequest",
            request,
            format!("min value {} is greater than default request value {}", t(min), t(request)),
        );
    }
    if above(request, max) {
        say(
            "defaultRequest",
            request,
            format!("default request value {} is greater than max value {}", t(request), t(max)),
        );
    }
    if above(request, default) {
        let why = format!("default request value {} is greater than default limit value {}", t(request), t(default));
        say("defaultRequest", request, why);
    }
    if above(min, default) {
        say("default", min, format!("min value {} is greater than default value {}", t(min), t(default)));
    }
    if above(default, max) {
        say("default", max, format!("default value {} is greater than max value {}", t(default), t(max)));
    }
    if let Some(r) = ratio {
        let one = Value::String("1".into());
        if crate::registry::quantity::compare(r, &one).is_some_and(|o| o.is_lt()) {
            say("maxLimitRequestRatio", ratio, format!("ratio {} is less than 1", t(ratio)));
        }
        let value = |q: Option<&Value>| q.and_then(crate::registry::quantity::value);
        if let (Some(r), Some(lo), Some(hi)) = (value(ratio), value(min), value(max)) {
            let limit = hi / lo;
            if lo > 0.0 && r > limit {
                say("maxLimitRequestRatio", ratio, format!("ratio {} is greater than max/min = {limit:.6}", t(ratio)));
            }
        }
    }
    let overcommittable = (!name.contains('/') || name.contains("kubernetes.io/")) && !name.starts_with("hugepages-");
    if let (false, Some(d), Some(r)) = (overcommittable, default, request) {
        if crate::registry::quantity::compare(d, r).is_some_and(|o| o.is_ne()) {
            let why =
                format!("default value {} must equal to defaultRequest value {} in {name}", t(default), t(request));
            say("defaultRequest", request, why);
        }
    }
}
