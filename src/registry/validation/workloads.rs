//! Workloads' checks: a controller's selector against its template, replicas, restart policies.

use super::*;

/// A Deployment's, ReplicaSet's, DaemonSet's or StatefulSet's spec (`what`, as kube's words name it): a
/// selector that selects, and the template it selects.
pub(super) fn workload_spec(what: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(n) = map.get("replicas").and_then(Value::as_i64).filter(|n| *n < 0) {
        invalid(causes, path.child("replicas"), n.to_string(), "must be greater than or equal to 0");
    }
    // kube's words name the pods of a Deployment's template as a ReplicaSet's.
    let owner = match what {
        "daemonset" => "DaemonSet",
        "statefulset" => "StatefulSet",
        _ => "ReplicaSet",
    };
    if let Some(spec) = map.get("template").and_then(|t| t.get("spec")).and_then(Value::as_object) {
        let at = format!("{}.spec", path.child("template"));
        one_of_at(spec, "restartPolicy", &at, &["Always"], causes);
        if owner != "DaemonSet" && spec.get("activeDeadlineSeconds").is_some_and(|v| !v.is_null()) {
            let why = format!("activeDeadlineSeconds in {owner} is not Supported");
            forbidden(causes, &format!("{at}.activeDeadlineSeconds"), &why);
        }
    }
    let selector = match map.get("selector") {
        None | Some(Value::Null) => return required(causes, path.child("selector")),
        Some(s) => s,
    };
    let empty = ["matchLabels", "matchExpressions"].iter().all(|f| match selector.get(*f) {
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => true,
    });
    if empty {
        let why = format!("empty selector is invalid for {what}");
        return invalid(causes, path.child("selector"), go_selector(selector), &why);
    }
    let written = map.get("template").and_then(|t| t["metadata"]["labels"].as_object());
    let labels: std::collections::BTreeMap<String, String> =
        written.into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
    // A selector kube cannot parse is refused by the schema's own checks; only one that parses is
    // held against the template.
    if let Some(s) = crate::selector::object::Selector::parse(selector) {
        if !s.matches(&labels) {
            // Go's `%#v` of the map, as kube's message shows it.
            let shown = match written {
                None => "map[string]string(nil)".to_string(),
                Some(_) => format!(
                    "map[string]string{{{}}}",
                    labels.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect::<Vec<_>>().join(", ")
                ),
            };
            let at = format!("{}.metadata.labels", path.child("template"));
            invalid(causes, at, shown, "`selector` does not match template `labels`");
        }
    }
}

/// Go's `%#v` of a selector, as kube's messages show it (a map or list sent is shown, empty or not;
/// one left out is nil).
pub(super) fn go_selector(v: &Value) -> String {
    let strings = |v: &Value| -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let labels = match v.get("matchLabels").and_then(Value::as_object) {
        Some(m) => {
            let mut pairs: Vec<String> =
                m.iter().map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default())).collect();
            pairs.sort();
            format!("{{{}}}", pairs.join(", "))
        }
        None => "(nil)".to_string(),
    };
    let exprs = match v.get("matchExpressions").and_then(Value::as_array) {
        Some(list) => {
            let each: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values") {
                        Some(vs) if vs.is_array() => format!("[]string{{{}}}", strings(vs)),
                        _ => "[]string(nil)".to_string(),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{values}}}",
                        e["key"].as_str().unwrap_or_default(),
                        e["operator"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            format!("{{{}}}", each.join(", "))
        }
        None => "(nil)".to_string(),
    };
    format!("v1.LabelSelector{{MatchLabels:map[string]string{labels}, MatchExpressions:[]v1.LabelSelectorRequirement{exprs}}}")
}

/// How a Deployment replaces its pods (kube's `ValidateDeploymentStrategy`): a known type, and a
/// rolling update's room only with that type, checked then.
pub(super) fn deployment_strategy(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let rolling = map.get("rollingUpdate").is_some_and(|v| !v.is_null());
    match map.get("type").and_then(Value::as_str) {
        Some("Recreate") if rolling => {
            forbidden(causes, &path.child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")
        }
        Some("RollingUpdate") => {
            if let Some(room) = map.get("rollingUpdate").and_then(Value::as_object) {
                deployment_rolling_update(room, &path.child("rollingUpdate"), causes);
            }
        }
        Some("Recreate") | None => {}
        Some(other) => {
            not_supported(causes, path.render(), &Value::String(other.into()), &["Recreate", "RollingUpdate"])
        }
    }
}

/// A Deployment's rolling update at `at` (kube's `ValidateRollingUpdateDeployment`): counts or
/// percents, not both zero, none unavailable beyond all.
fn deployment_rolling_update(map: &Map<String, Value>, at: &str, causes: &mut Vec<Cause>) {
    let unavailable = int_or_percent(map, "maxUnavailable", at, true, causes);
    let surge = int_or_percent(map, "maxSurge", at, false, causes);
    if unavailable == 0 && surge == 0 {
        let shown = shown_int_or_string(map.get("maxUnavailable").unwrap_or(&Value::from(0)));
        invalid(causes, format!("{at}.maxUnavailable"), shown, "may not be 0 when `maxSurge` is 0");
    }
}

/// How a DaemonSet replaces its pods (kube's `ValidateDaemonSetUpdateStrategy`): a rolling update's
/// room is checked only when it rolls.
pub(super) fn daemonset_strategy(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if map.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        if let Some(room) = map.get("rollingUpdate").and_then(Value::as_object) {
            daemonset_rolling_update(room, &path.child("rollingUpdate"), causes);
        }
    }
}

/// A DaemonSet's rolling update at `at` (kube's `ValidateRollingUpdateDaemonSet`): counts or percents
/// of at most all, exactly one of them above zero.
fn daemonset_rolling_update(map: &Map<String, Value>, at: &str, causes: &mut Vec<Cause>) {
    let unavailable = int_or_percent(map, "maxUnavailable", at, true, causes);
    let surge = int_or_percent(map, "maxSurge", at, true, causes);
    if unavailable != 0 && surge != 0 {
        let shown = shown_int_or_string(map.get("maxSurge").unwrap_or(&Value::from(0)));
        invalid(causes, format!("{at}.maxSurge"), shown, "may not be set when maxUnavailable is non-zero");
    } else if unavailable == 0 && surge == 0 {
        let why = "Required value: cannot be 0 when maxSurge is 0";
        push(causes, cause("FieldValueRequired", &format!("{at}.maxUnavailable"), why));
    }
}

/// A CronJob (kube's `validateCronJobSpec` and `ValidateCronJobCreate`; its Job template is checked
/// as a Job's where it is): a schedule robfig/cron reads, with no time zone in it (unless the old one
/// had one), a time zone kube knows, a known concurrency policy, counts not below 0, and on create a
/// name short enough for the Jobs it makes.
pub(super) fn cronjob(obj: &Value, old: Option<&Value>, causes: &mut Vec<Cause>) {
    let (spec, was) = (&obj["spec"], old.map(|o| &o["spec"]));
    match spec["schedule"].as_str().unwrap_or_default() {
        "" => required(causes, "spec.schedule".into()),
        schedule => {
            if let Some(why) = cron::schedule_error(schedule) {
                invalid(causes, "spec.schedule".into(), format!("{schedule:?}"), &why);
            }
            let allowed = was.is_some_and(|w| w["schedule"].as_str().unwrap_or_default().contains("TZ"));
            if schedule.contains("TZ") {
                let why = match allowed {
                    true if spec.get("timeZone").is_some_and(|t| !t.is_null()) => {
                        Some("cannot use both timeZone field and TZ or CRON_TZ in schedule")
                    }
                    true => None,
                    false => Some("cannot use TZ or CRON_TZ in schedule, use timeZone field instead"),
                };
                if let Some(why) = why {
                    invalid(causes, "spec.schedule".into(), format!("{schedule:?}"), why);
                }
            }
        }
    }
    for field in ["startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        if let Some(n) = spec[field].as_i64().filter(|n| *n < 0) {
            invalid(causes, format!("spec.{field}"), n.to_string(), "must be greater than or equal to 0");
        }
    }
    if let Some(zone) = spec["timeZone"].as_str().filter(|_| was.is_none_or(|w| w["timeZone"] != spec["timeZone"])) {
        time_zone(zone, causes);
    }
    if let Some(map) = spec.as_object() {
        one_of_at(map, "concurrencyPolicy", "spec", &["Allow", "Forbid", "Replace"], causes);
    }
    let name = meta::meta_str(obj, "name").unwrap_or_default();
    if old.is_none() && name.len() > 52 {
        invalid(causes, "metadata.name".into(), format!("{name:?}"), "must be no more than 52 characters");
    }
}

/// A CronJob's time zone (kube's `validateTimeZone`): a name of the IANA database, not `Local`.
fn time_zone(zone: &str, causes: &mut Vec<Cause>) {
    let at = || "spec.timeZone".to_string();
    if zone.is_empty() {
        return invalid(causes, at(), "\"\"".into(), "timeZone must be nil or non-empty string");
    }
    let part_ok = |p: &str| {
        p != "."
            && p != ".."
            && !p.starts_with('-')
            && (1..=14).contains(&p.len())
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-+".contains(&b))
    };
    if !zone.split('/').all(part_ok) {
        return invalid(causes, at(), format!("{zone:?}"), &format!("unknown time zone {zone}"));
    }
    if zone.eq_ignore_ascii_case("Local") {
        let why = "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones";
        invalid(causes, at(), format!("{zone:?}"), why);
    }
    if let Some(why) = cron::location_error(zone) {
        invalid(causes, at(), format!("{zone:?}"), &why);
    }
}
