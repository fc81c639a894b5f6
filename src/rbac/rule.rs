//! Policy rules: lenient parsing from JSON and kube's matching helpers (`rbac/v1` helpers: VerbMatches etc.).

use serde_json::{json, Map, Value};

/// Wildcard accepted by verbs, apiGroups, resources and nonResourceURLs.
const ALL: &str = "*";

/// One `PolicyRule`; list fields that are absent or malformed are empty, which makes them match nothing
/// (except `resourceNames`, where empty means "any name", exactly as in kube).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct PolicyRule {
    pub(crate) verbs: Vec<String>,
    pub(crate) api_groups: Vec<String>,
    pub(crate) resources: Vec<String>,
    pub(crate) resource_names: Vec<String>,
    pub(crate) non_resource_urls: Vec<String>,
}

/// The strings of a JSON array field; non-string items are dropped rather than failing the whole rule.
fn strings(obj: &Map<String, Value>, key: &str) -> Vec<String> {
    match obj.get(key) {
        Some(Value::Array(items)) => items.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect(),
        _ => Vec::new(),
    }
}

/// Parses the `rules` array of a Role or ClusterRole; anything that is not an object is skipped.
pub(crate) fn parse_rules(rules: Option<&Value>) -> Vec<PolicyRule> {
    let Some(Value::Array(items)) = rules else { return Vec::new() };
    items.iter().filter_map(PolicyRule::parse).collect()
}

/// Approximate heap bytes of a list of strings.
pub(crate) fn strings_size(list: &Vec<String>) -> usize {
    list.capacity() * std::mem::size_of::<String>() + list.iter().map(String::capacity).sum::<usize>()
}

impl PolicyRule {
    /// Parses one rule object; `None` when it is not an object.
    pub(crate) fn parse(v: &Value) -> Option<PolicyRule> {
        let obj = v.as_object()?;
        Some(PolicyRule {
            verbs: strings(obj, "verbs"),
            api_groups: strings(obj, "apiGroups"),
            resources: strings(obj, "resources"),
            resource_names: strings(obj, "resourceNames"),
            non_resource_urls: strings(obj, "nonResourceURLs"),
        })
    }

    /// kube's RuleAllows for a resource request; `subresource` and `name` are "" when absent.
    pub(crate) fn allows_resource(
        &self,
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        name: &str,
    ) -> bool {
        self.verb_matches(verb)
            && self.api_groups.iter().any(|g| g == ALL || g == group)
            && self.resource_matches(resource, subresource)
            && self.resource_name_matches(name)
    }

    /// kube's RuleAllows for a non-resource request.
    pub(crate) fn allows_non_resource(&self, verb: &str, path: &str) -> bool {
        self.verb_matches(verb)
            && self.non_resource_urls.iter().any(|u| {
                u == ALL
                    || u == path
                    // A trailing `*` (any number of them, as kube trims them all) is a prefix match.
                    || (u.ends_with('*') && path.starts_with(u.trim_end_matches('*')))
            })
    }

    fn verb_matches(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == ALL || v == verb)
    }

    /// kube matches `*`, the exact `resource[/subresource]`, or `*/subresource`; notably `resource/*` is not a
    /// wildcard in kube, so it only matches a literal subresource named `*`.
    fn resource_matches(&self, resource: &str, subresource: &str) -> bool {
        self.resources.iter().any(|r| {
            if r == ALL {
                return true;
            }
            if subresource.is_empty() {
                return r == resource;
            }
            let combined_len = resource.len() + 1 + subresource.len();
            let exact = r.len() == combined_len
                && r.starts_with(resource)
                && r.as_bytes().get(resource.len()) == Some(&b'/')
                && r.ends_with(subresource);
            exact || (r.len() == subresource.len() + 2 && r.starts_with("*/") && r.ends_with(subresource))
        })
    }

    /// Empty resourceNames allow any name; otherwise the request must carry one of them, so a rule with
    /// resourceNames never grants list/create/deletecollection without a name (kube behaviour).
    fn resource_name_matches(&self, name: &str) -> bool {
        self.resource_names.is_empty() || self.resource_names.iter().any(|n| n == name)
    }

    /// The rule as `status.resourceRules` item (kube's ResourceRule JSON, empty optional lists omitted).
    pub(crate) fn to_resource_rule(&self) -> Value {
        let mut obj = Map::new();
        obj.insert("verbs".into(), json!(self.verbs));
        if !self.api_groups.is_empty() {
            obj.insert("apiGroups".into(), json!(self.api_groups));
        }
        obj.insert("resources".into(), json!(self.resources));
        if !self.resource_names.is_empty() {
            obj.insert("resourceNames".into(), json!(self.resource_names));
        }
        Value::Object(obj)
    }

    /// The rule as `status.nonResourceRules` item.
    pub(crate) fn to_non_resource_rule(&self) -> Value {
        json!({ "verbs": self.verbs, "nonResourceURLs": self.non_resource_urls })
    }

    /// Approximate heap bytes owned by this rule.
    pub(crate) fn heap_size(&self) -> usize {
        strings_size(&self.verbs)
            + strings_size(&self.api_groups)
            + strings_size(&self.resources)
            + strings_size(&self.resource_names)
            + strings_size(&self.non_resource_urls)
    }
}
