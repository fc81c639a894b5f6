//! Role and ClusterRole rules as kube's RBAC validation checks them.

use super::*;

/// One rule of a Role or ClusterRole (kube's `ValidatePolicyRule`): verbs, and either non-resource
/// URLs (a ClusterRole's only) or API groups and resources.
pub(super) fn policy_rule(rule: &Value, at: &str, namespaced: bool, causes: &mut Vec<Cause>) {
    let list = |f: &str| rule.get(f).and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if list("verbs").is_empty() {
        push(
            causes,
            cause(
                "FieldValueRequired",
                &format!("{at}.verbs"),
                "Required value: verbs must contain at least one value",
            ),
        );
    }
    let urls = list("nonResourceURLs");
    if !urls.is_empty() {
        // Go's `%#v` of the list.
        let shown = format!("[]string{{{}}}", urls.iter().map(shown).collect::<Vec<_>>().join(", "));
        if namespaced {
            invalid(
                causes,
                format!("{at}.nonResourceURLs"),
                shown.clone(),
                "namespaced rules cannot apply to non-resource URLs",
            );
        }
        if !list("apiGroups").is_empty() || !list("resources").is_empty() || !list("resourceNames").is_empty() {
            let why = "rules cannot apply to both regular resources and non-resource URLs";
            invalid(causes, format!("{at}.nonResourceURLs"), shown, why);
        }
        return;
    }
    if list("apiGroups").is_empty() {
        let why = "Required value: resource rules must supply at least one api group";
        push(causes, cause("FieldValueRequired", &format!("{at}.apiGroups"), why));
    }
    if list("resources").is_empty() {
        let why = "Required value: resource rules must supply at least one resource";
        push(causes, cause("FieldValueRequired", &format!("{at}.resources"), why));
    }
}
