//! RBAC escalation prevention as kube-apiserver's RBAC storage does it: nobody grants, through a Role,
//! ClusterRole or binding, a permission they do not hold themselves, unless they may `escalate` (roles)
//! or `bind` (bindings). This is the IO-free part: whether one set of rules covers another, and the
//! message naming what is missing (component-helpers' `policy_comparator.go`, and
//! `pkg/registry/rbac/validation`'s `ConfirmNoEscalation` and `CompactRules`).

use std::collections::BTreeSet;

use super::rule::PolicyRule;
use super::User;

const ALL: &str = "*";

/// The rules of `servant` that `owner` does not cover, each broken down into one verb, group, resource
/// and name (or one URL and verb), as kube's `Covers` returns them; empty when all are covered.
pub fn uncovered(owner: &[PolicyRule], servant: &[PolicyRule]) -> Vec<PolicyRule> {
    servant.iter().flat_map(breakdown).filter(|sub| !owner.iter().any(|o| covers(o, sub))).collect()
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

fn has_all(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| owner.contains(w))
}

/// kube's `ruleCovers`: wildcards in the owner's rule cover anything; the servant's are compared
/// literally (granting `*` needs holding `*`).
fn covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = owner.verbs.iter().any(|v| v == ALL) || has_all(&owner.verbs, &sub.verbs);
    let groups = owner.api_groups.iter().any(|g| g == ALL) || has_all(&owner.api_groups, &sub.api_groups);
    let resources = owner.resources.iter().any(|r| r == ALL)
        || sub.resources.iter().all(|r| {
            owner.resources.contains(r)
                || r.split_once('/').is_some_and(|(_, sub)| owner.resources.iter().any(|o| *o == format!("*/{sub}")))
        });
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
    let missing = uncovered(owner, granted);
    if missing.is_empty() {
        return Ok(());
    }
    // Sorted and without repeats, as Go's sets.String lists them.
    let described: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    Err(format!(
        "user {:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        user.name,
        quoted(&user.groups),
        described.into_iter().collect::<Vec<_>>().join("\n")
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
        assert!(uncovered(
            &owner,
            &rules(json!([{"verbs": ["get", "delete"], "apiGroups": [""], "resources": ["pods"]}]))
        )
        .is_empty());
        assert!(uncovered(
            &owner,
            &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log", "services/log"]}]))
        )
        .is_empty());
        // `pods` does not cover `pods/exec`; granting `*` needs holding `*`.
        assert_eq!(
            uncovered(&owner, &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods/exec"]}]))).len(),
            1
        );
        assert_eq!(
            uncovered(&owner, &rules(json!([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]}]))).len(),
            1
        );
        // Names: holding a name covers only it; holding none covers all.
        let named =
            rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["a"]}]));
        assert!(uncovered(&named, &named).is_empty());
        assert_eq!(
            uncovered(&named, &rules(json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["secrets"]}]))).len(),
            1
        );
        // URLs: a trailing `*` is a prefix.
        let urls = rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/api/*"]}]));
        assert!(
            uncovered(&urls, &rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/api/v1", "/api/"]}]))).is_empty()
        );
        assert_eq!(uncovered(&urls, &rules(json!([{"verbs": ["get"], "nonResourceURLs": ["/apis"]}]))).len(), 1);
        // A rule with no verbs grants nothing to check.
        assert!(uncovered(&[], &rules(json!([{"verbs": [], "apiGroups": [""], "resources": ["pods"]}]))).is_empty());
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
}
