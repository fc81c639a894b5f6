//! RBAC escalation prevention as kube-apiserver's RBAC storage does it: nobody grants, through a Role,
//! ClusterRole or binding, a permission they do not hold themselves, unless they may `escalate` (roles)
//! or `bind` (bindings). This is the IO-free part: whether one set of rules covers another, and the
//! message naming what is missing (component-helpers' `policy_comparator.go`, and
//! `pkg/registry/rbac/validation`'s `ConfirmNoEscalation` and `CompactRules`).

use std::collections::BTreeSet;

use super::rule::PolicyRule;
use super::User;

const ALL: &str = "*";

/// How many list entries a check may compare, all told: a little under a second of one core at worst.
/// kube breaks every granted rule into its verb, group, resource and name combinations; a 3 KB rule of
/// 100 entries in each list makes 10^8 of them, which in a shared server would take every tenant down
/// with the one that sent it.
const WORK_LIMIT: usize = 1 << 23;

/// A grant too large to compare with what is held within [`WORK_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooLarge;

/// The rules of `servant` that `owner` does not cover, each broken down into one verb, group, resource
/// and name (or one URL and verb), as kube's `Covers` returns them; empty when all are covered.
///
/// A rule one held rule covers whole is covered without breaking it down (the answer is the same: a
/// rule covers another when it covers each entry of each list); only the others are broken down, and
/// only while the comparisons stay within [`WORK_LIMIT`].
pub fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Result<Vec<PolicyRule>, TooLarge> {
    let held: usize = owner.iter().map(weight).sum::<usize>().max(1);
    let mut work = 0usize;
    let mut spend = |units: usize| {
        work = work.saturating_add(units);
        if work > WORK_LIMIT {
            Err(TooLarge)
        } else {
            Ok(())
        }
    };
    let mut out = Vec::new();
    for rule in servant {
        spend(held.saturating_add(owner.len().saturating_mul(weight(rule))))?;
        if owner.iter().any(|o| covers(o, rule)) {
            continue;
        }
        spend(pieces(rule).saturating_mul(held))?;
        out.extend(breakdown(rule).into_iter().filter(|sub| !owner.iter().any(|o| covers(o, sub))));
    }
    Ok(out)
}

/// The entries of a rule's lists, which is what comparing with it costs.
fn weight(rule: &PolicyRule) -> usize {
    1 + rule.verbs.len()
        + rule.api_groups.len()
        + rule.resources.len()
        + rule.resource_names.len()
        + rule.non_resource_urls.len()
}

/// How many rules [`breakdown`] makes of `rule`.
fn pieces(rule: &PolicyRule) -> usize {
    let resources = rule
        .api_groups
        .len()
        .saturating_mul(rule.resources.len())
        .saturating_mul(rule.verbs.len())
        .saturating_mul(rule.resource_names.len().max(1));
    resources.saturating_add(rule.non_resource_urls.len().saturating_mul(rule.verbs.len()))
}

/// kube's `BreakdownRule`: a rule with no verbs, or with resources and no groups, breaks into nothing (and
/// is left to validation).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let one = |s: &String| vec![s.clone()];
    let mut out = Vec::new();
    for group in &rule.api_groups {
        for resource in &rule.resources {
            for verb in &rule.verbs {
                let base = PolicyRule {
                    verbs: one(verb),
                    api_groups: one(group),
                    resources: one(resource),
                    ..PolicyRule::default()
                };
                if rule.resource_names.is_empty() {
                    out.push(base);
                } else {
                    out.extend(
                        rule.resource_names.iter().map(|n| PolicyRule { resource_names: one(n), ..base.clone() }),
                    );
                }
            }
        }
    }
    for url in &rule.non_resource_urls {
        for verb in &rule.verbs {
            out.push(PolicyRule { verbs: one(verb), non_resource_urls: one(url), ..PolicyRule::default() });
        }
    }
    out
}

/// Whether every wanted entry is held; long lists on both sides are compared through a set, so that
/// checking a rule whole costs the lengths of its lists and not their product.
fn has_all(owner: &[String], wanted: &[String]) -> bool {
    if owner.len() > 16 && wanted.len() > 1 {
        let held: std::collections::HashSet<&str> = owner.iter().map(String::as_str).collect();
        return wanted.iter().all(|w| held.contains(w.as_str()));
    }
    wanted.iter().all(|w| owner.contains(w))
}

/// kube's `ruleCovers`: wildcards in the owner's rule cover anything; the servant's are compared
/// literally (granting `*` needs holding `*`).
fn covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = owner.verbs.iter().any(|v| v == ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = owner.api_groups.iter().any(|g| g == ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = owner.resources.iter().any(|r| r == ALL) || {
        let held: std::collections::HashSet<&str> = if owner.resources.len() > 16 && sub.resources.len() > 1 {
            owner.resources.iter().map(String::as_str).collect()
        } else {
            Default::default()
        };
        let holds = |r: &str| if held.is_empty() { owner.resources.iter().any(|o| o == r) } else { held.contains(r) };
        sub.resources.iter().all(|r| holds(r) || r.split_once('/').is_some_and(|(_, sub)| holds(&format!("*/{sub}"))))
    };
    let urls = sub.non_resource_urls.iter().all(|u| {
        owner.non_resource_urls.iter().any(|o| o == u || (o.ends_with('*') && u.starts_with(o.trim_end_matches('*'))))
    });
    let names = if sub.resource_names.is_empty() {
        owner.resource_names.is_empty()
    } else {
        owner.resource_names.is_empty() || has_all(&owner.resource_names, &sub.resource_names)
    };
    verbs && groups && resources && urls && names
}

/// kube's `CompactRules`: broken-down rules of one group, resource and (at most one) name are merged into
/// one rule with their verbs in order of first appearance, repeats kept; the others stay as they are.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    let simple = |r: &PolicyRule| {
        r.non_resource_urls.is_empty()
            && r.resource_names.len() <= 1
            && r.api_groups.len() == 1
            && r.resources.len() == 1
    };
    for rule in rules {
        if simple(&rule) {
            let same = out.iter_mut().find(|o| {
                simple(o)
                    && o.api_groups == rule.api_groups
                    && o.resources == rule.resources
                    && o.resource_names == rule.resource_names
            });
            if let Some(o) = same {
                o.verbs.extend(rule.verbs);
                continue;
            }
        }
        out.push(rule);
    }
    out
}

/// Go's `%q` of a list of strings: `["a" "b"]`.
fn quoted(list: &[String]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// kube's `CompactString`: the rule's non-empty fields in a fixed order.
fn compact_string(r: &PolicyRule) -> String {
    let fields = [
        ("APIGroups", &r.api_groups),
        ("Resources", &r.resources),
        ("NonResourceURLs", &r.non_resource_urls),
        ("ResourceNames", &r.resource_names),
        ("Verbs", &r.verbs),
    ];
    let parts: Vec<String> =
        fields.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| format!("{k}:{}", quoted(v))).collect();
    format!("{{{}}}", parts.join(", "))
}

/// kube's `ConfirmNoEscalation`: `Ok` when `owner` (the user's rules where the grant applies) covers
/// `granted`, else the message kube-apiserver puts after `... is forbidden: `.
pub fn confirm_no_escalation(user: &User, owner: &[PolicyRule], granted: &[PolicyRule]) -> Result<(), String> {
    let described = match uncovered(owner, granted) {
        Ok(missing) if missing.is_empty() => return Ok(()),
        // Sorted and without repeats, as Go's sets.String lists them.
        Ok(missing) => compact(missing).iter().map(compact_string).collect::<BTreeSet<String>>().into_iter().collect(),
        Err(TooLarge) => {
            vec!["(rules with more combinations of verbs, groups, resources and names than can be compared with those \
             held; grant rules that a single held rule covers whole, or hold the escalate verb)"
                .to_string()]
        }
    };
    Err(format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        quoted(&user.groups),
        described.join("\n")
    ))
}

/// What a ClusterRole with an aggregation rule needs besides its rules: everything (`*` on `*` in every
/// group, and every URL), since it can gather anything.
pub fn full_authority() -> Vec<PolicyRule> {
    let all = || vec![ALL.to_string()];
    vec![
        PolicyRule { verbs: all(), api_groups: all(), resources: all(), ..PolicyRule::default() },
        PolicyRule { verbs: all(), non_resource_urls: all(), ..PolicyRule::default() },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: serde_json::Value) -> Vec<PolicyRule> {
        super::super::rule::parse_rules(Some(&v))
    }

    fn missing(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
        uncovered(owner, servant).expect("small enough to compare")
    }

    fn user() -> User {
        User {
            name: "system:serviceaccount:rbac:privesc".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:serviceaccounts:rbac".into(),
                "system:authenticated".into(),
            ],
        }
    }

    #[test]
    fn owners_wildcards_cover_and_servants_are_literal() {
        let owner = rules(json!([{"verbs": ["*"], "apiGroups": [""], "resources": ["pods", "*/log"]}]));
        assert!(missing(
            &owner,
            &rules(json!([{"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods"]}]))
        )
        .is_empty());
        assert!(missing(
            &owner,
            &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log", "services/log"]}]))
        )
        .is_empty());
        // `pods` does not cover `pods/exec`; granting `*` needs holding `*`.
        assert_eq!(
            missing(&owner, &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/exec"]}]))).len(),
            1
        );
        assert_eq!(
            missing(&owner, &rules(json!([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]}]))).len(),
            1
        );
        // Names: holding a name covers only it; holding none covers all.
        let named =
            rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}]));
        assert!(missing(&named, &named).is_empty());
        assert_eq!(
            missing(&named, &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]))).len(),
            1
        );
        // URLs: a trailing `*` is a prefix.
        let urls = rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/api/*"]}]));
        assert!(missing(&urls, &rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/api/v1", "/api/"]}]))).is_empty());
        assert_eq!(missing(&urls, &rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/apis"]}]))).len(), 1);
        // A rule with no verbs grants nothing to check.
        assert!(missing(&[], &rules(json!([{"verbs": [], "apiGroups": [""], "resources": ["pods"]}]))).is_empty());
    }

    #[test]
    fn the_message_is_kubes() {
        let owner = rules(json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]));
        let granted = rules(json!([
            {"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
        ]));
        let message = confirm_no_escalation(&user(), &owner, &granted).unwrap_err();
        assert_eq!(
            message,
            "user \"system:serviceaccount:rbac:privesc\" (groups=[\"system:serviceaccounts\" \"system:serviceaccounts:rbac\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"delete\"]}\n\
             {APIGroups:[\"*\"], Resources:[\"*\"], Verbs:[\"*\"]}\n\
             {NonResourceURLs:[\"/metrics\"], Verbs:[\"get\"]}"
        );
        assert!(confirm_no_escalation(&user(), &full_authority(), &granted).is_ok());
    }

    #[test]
    fn names_and_verbs_compact_as_kube_does() {
        let granted = rules(
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["a", "b"]}]),
        );
        let message = confirm_no_escalation(&User::default(), &[], &granted).unwrap_err();
        assert!(
            message.ends_with(
                "{APIGroups:[\"\"], Resources:[\"pods\"], ResourceNames:[\"a\"], Verbs:[\"get\" \"list\"]}\n\
             {APIGroups:[\"\"], Resources:[\"pods\"], ResourceNames:[\"b\"], Verbs:[\"get\" \"list\"]}"
            ),
            "{message}"
        );
        assert!(message.starts_with("user \"\" (groups=[]) is attempting"), "{message}");
    }

    #[test]
    fn a_grant_of_every_combination_is_refused_without_building_them() {
        let many = |p: &str| (0..100).map(|i| format!("{p}{i}")).collect::<Vec<_>>();
        let huge = rules(json!([{
            "verbs": many("v"), "apiGroups": many("g"), "resources": many("r"), "resourceNames": many("n"),
        }]));
        // 10^8 combinations: refused at once, where building them would take gigabytes.
        let held = rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}]));
        assert_eq!(uncovered(&held, &huge), Err(TooLarge));
        let message = confirm_no_escalation(&user(), &held, &huge).unwrap_err();
        assert!(
            message
                .contains("is attempting to grant RBAC permissions not currently held:\n(rules with more combinations"),
            "{message}"
        );
        // Held whole by one rule, it is covered however large, with long lists compared through sets.
        assert!(missing(&huge, &huge).is_empty());
        assert!(missing(&full_authority(), &huge).is_empty());
        // A grant a few rules cover together still breaks down, as kube's does.
        let split = rules(json!([
            {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]},
        ]));
        let both = rules(json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}]));
        assert!(missing(&split, &both).is_empty());
        let more = rules(json!([{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}]));
        assert_eq!(missing(&split, &more).len(), 1);
    }
}
