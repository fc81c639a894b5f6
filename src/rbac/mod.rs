//! Kubernetes RBAC authorization (kube-apiserver 1.33 semantics) over unstructured RBAC objects; IO-free.
//!
//! The index resolves every binding's roleRef (and ClusterRole aggregation) once at build time and keys the
//! bindings by the user names and group names their subjects match, so a check only looks at the bindings that
//! can apply to the requesting user.

mod defaults;
mod escalation;
mod reconcile;
mod rule;
#[cfg(test)]
mod tests;

pub use defaults::{default_cluster_role_bindings, default_cluster_roles};
pub use reconcile::{policy_revision, reconcile};

use crate::selector::object::Selector;
pub(crate) use rule::{parse_rules, PolicyRule};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::mem::size_of;
use std::sync::Arc;

/// Resolved rules of one role, shared by every binding that references it.
type Rules = Arc<[PolicyRule]>;

/// How deep aggregated ClusterRoles may select other aggregated ClusterRoles. kube's controller reaches the
/// transitive closure over repeated syncs (admin selects edit, which selects view); the cap only keeps
/// pathological chains from exhausting the stack.
const MAX_AGGREGATION_DEPTH: usize = 32;

/// The most one aggregated ClusterRole gathers, in bytes of rules in memory: kube's aggregation
/// controller writes the union into the role, and a write past etcd's 1.5 MiB request limit fails; a
/// rule takes about three times its JSON in memory.
const UNION_LIMIT: usize = 9 << 19;

/// The most every aggregated ClusterRole of one cluster gathers together. Unions are copies, so without
/// it a thousand small roles selecting one large one would multiply it a thousandfold, in a server
/// every tenant shares; kube is bound by its stored objects, each written by the controller.
const UNIONS_LIMIT: usize = 16 << 20;

/// Username prefix the service account authenticator gives tokens of service accounts.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// The RBAC objects of one logical cluster, indexed once for fast evaluation (built when its RBAC objects change;
/// cheap to share with Arc).
#[derive(Debug, Default)]
pub struct RbacIndex {
    /// ClusterRoleBindings.
    cluster: Scope,
    /// RoleBindings by namespace.
    namespaces: HashMap<String, Scope>,
    size: usize,
}

/// The authenticated identity asking.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct User {
    /// Username (`system:serviceaccount:<ns>:<name>` for service accounts).
    pub name: String,
    /// Groups as set by the authenticator (including `system:authenticated`, `system:serviceaccounts`, ...).
    pub groups: Vec<String>,
}

/// The attributes of a request to authorize.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<'a> {
    /// A request for an API resource (`group` is "" for the core group).
    Resource {
        /// API verb (get, list, watch, create, update, patch, delete, deletecollection, or a special verb).
        verb: &'a str,
        /// API group, "" for core.
        group: &'a str,
        /// Plural resource name.
        resource: &'a str,
        /// Subresource such as `log` or `status`; `None` and `Some("")` mean none.
        subresource: Option<&'a str>,
        /// Namespace; `None` (or "") for cluster-scoped and all-namespaces requests, which only
        /// ClusterRoleBindings can grant.
        namespace: Option<&'a str>,
        /// Object name; `None` for list/watch-all/create-without-name, which rules with resourceNames never grant.
        name: Option<&'a str>,
    },
    /// A request for a non-resource path such as `/healthz` or `/apis`.
    NonResource {
        /// HTTP-derived verb (get, post, put, ...).
        verb: &'a str,
        /// Request path.
        path: &'a str,
    },
}

/// Bindings of one scope (cluster-wide or one namespace), keyed by the subjects that match them.
#[derive(Debug, Default)]
struct Scope {
    /// Resolved rules of each binding, in input order (kept so `rules_for` lists rules in binding order).
    bindings: Vec<Rules>,
    /// Binding positions per matching username (User and ServiceAccount subjects).
    by_user: HashMap<String, Vec<u32>>,
    /// Binding positions per matching group name.
    by_group: HashMap<String, Vec<u32>>,
}

/// A subject reduced to what it matches against.
enum SubjectKey {
    User(String),
    Group(String),
}

impl Scope {
    fn add(&mut self, rules: Rules, subjects: Vec<SubjectKey>) {
        let Ok(pos) = u32::try_from(self.bindings.len()) else { return };
        if subjects.is_empty() {
            return;
        }
        self.bindings.push(rules);
        for subject in subjects {
            let list = match subject {
                SubjectKey::User(name) => self.by_user.entry(name).or_default(),
                SubjectKey::Group(name) => self.by_group.entry(name).or_default(),
            };
            // A binding naming the same subject twice must still be listed once.
            if list.last() != Some(&pos) {
                list.push(pos);
            }
        }
    }

    /// Positions of bindings that apply to `user`; may repeat a binding matched through several keys.
    fn positions<'s>(&'s self, user: &'s User) -> impl Iterator<Item = u32> + 's {
        let by_user = self.by_user.get(&user.name).into_iter().flatten();
        let by_group = user.groups.iter().filter_map(|g| self.by_group.get(g)).flatten();
        by_user.chain(by_group).copied()
    }

    fn any_rule(&self, user: &User, pred: &dyn Fn(&PolicyRule) -> bool) -> bool {
        self.positions(user).any(|p| self.bindings.get(p as usize).is_some_and(|rules| rules.iter().any(pred)))
    }

    /// Applying bindings, each once, in input order.
    fn sorted_positions(&self, user: &User) -> Vec<u32> {
        let mut positions: Vec<u32> = self.positions(user).collect();
        positions.sort_unstable();
        positions.dedup();
        positions
    }

    /// Heap bytes of the scope itself, not counting the shared rules.
    fn heap_size(&self) -> usize {
        let map_size = |m: &HashMap<String, Vec<u32>>| {
            m.capacity() * (size_of::<String>() + size_of::<Vec<u32>>() + size_of::<u64>())
                + m.iter().map(|(k, v)| k.capacity() + v.capacity() * size_of::<u32>()).sum::<usize>()
        };
        self.bindings.capacity() * size_of::<Rules>() + map_size(&self.by_user) + map_size(&self.by_group)
    }
}

/// `metadata.<key>` as a string.
fn meta_str<'v>(obj: &'v Value, key: &str) -> Option<&'v str> {
    obj.get("metadata")?.get(key)?.as_str()
}

/// `metadata.labels`, ignoring non-string values.
fn labels(obj: &Value) -> BTreeMap<String, String> {
    match obj.get("metadata").and_then(|m| m.get("labels")) {
        Some(Value::Object(map)) => map.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned()))).collect(),
        _ => BTreeMap::new(),
    }
}

/// The subjects of a binding as match keys. ServiceAccount subjects without a namespace default to the
/// RoleBinding's namespace and match nothing in a ClusterRoleBinding (`binding_ns` = ""), as kube's appliesTo.
fn subject_keys(binding: &Value, binding_ns: &str) -> Vec<SubjectKey> {
    let Some(Value::Array(subjects)) = binding.get("subjects") else { return Vec::new() };
    subjects
        .iter()
        .filter_map(|s| {
            let name = s.get("name")?.as_str()?;
            match s.get("kind")?.as_str()? {
                "User" => Some(SubjectKey::User(name.to_owned())),
                "Group" => Some(SubjectKey::Group(name.to_owned())),
                "ServiceAccount" => {
                    let ns = s.get("namespace").and_then(Value::as_str).filter(|n| !n.is_empty()).unwrap_or(binding_ns);
                    if ns.is_empty() {
                        return None;
                    }
                    Some(SubjectKey::User(format!("{SERVICE_ACCOUNT_PREFIX}{ns}:{name}")))
                }
                _ => None,
            }
        })
        .collect()
}

/// `roleRef` as (kind, name); `None` for one naming a group other than RBAC's (which writes refuse, and
/// which must grant nothing should one have been stored).
fn role_ref(binding: &Value) -> Option<(&str, &str)> {
    let r = binding.get("roleRef")?;
    let group = r.get("apiGroup").and_then(Value::as_str).unwrap_or_default();
    if !group.is_empty() && group != "rbac.authorization.k8s.io" {
        return None;
    }
    Some((r.get("kind")?.as_str()?, r.get("name")?.as_str()?))
}

/// A ClusterRole as read from storage.
struct RawClusterRole {
    labels: BTreeMap<String, String>,
    rules: Vec<PolicyRule>,
    /// `Some` for aggregated roles; an invalid selector is `None` and selects nothing.
    selectors: Option<Vec<Option<Selector>>>,
}

/// Resolution state of one ClusterRole during aggregation.
#[derive(Clone)]
enum State {
    Pending,
    InProgress,
    Done(Rules),
}

/// Effective rules of every ClusterRole by name, with aggregated roles replaced by the union of the rules of the
/// roles they select, the way kube's clusterrole-aggregation controller writes them: selectors in order, selected
/// roles in name order, itself excluded, duplicate rules dropped.
fn resolve_cluster_roles(objs: &[Value]) -> HashMap<String, Rules> {
    // BTreeMap gives kube's by-name order; a repeated name keeps the last object, like a later write would.
    let mut by_name: BTreeMap<String, RawClusterRole> = BTreeMap::new();
    for obj in objs {
        let Some(name) = meta_str(obj, "name") else { continue };
        let selectors = match obj.get("aggregationRule") {
            Some(rule @ Value::Object(_)) => Some(match rule.get("clusterRoleSelectors") {
                Some(Value::Array(sels)) => sels.iter().map(Selector::parse).collect(),
                _ => Vec::new(),
            }),
            _ => None,
        };
        let raw = RawClusterRole { labels: labels(obj), rules: parse_rules(obj.get("rules")), selectors };
        by_name.insert(name.to_owned(), raw);
    }
    let (names, raws): (Vec<String>, Vec<RawClusterRole>) = by_name.into_iter().unzip();
    let mut states = vec![State::Pending; raws.len()];
    let mut gathered = 0;
    for i in 0..raws.len() {
        resolve(i, &raws, &mut states, 0, &mut gathered);
    }
    names
        .into_iter()
        .zip(states)
        .filter_map(|(name, state)| match state {
            State::Done(rules) => Some((name, rules)),
            _ => None,
        })
        .collect()
}

/// The rules of role `i`; `gathered` counts the bytes of every union made so far, against
/// [`UNIONS_LIMIT`].
fn resolve(i: usize, raws: &[RawClusterRole], states: &mut [State], depth: usize, gathered: &mut usize) -> Rules {
    match &states[i] {
        State::Done(rules) => return rules.clone(),
        // A selection cycle: the role being computed contributes nothing to itself.
        State::InProgress => return Arc::from([]),
        State::Pending => {}
    }
    let Some(selectors) = &raws[i].selectors else {
        let rules: Rules = raws[i].rules.clone().into();
        states[i] = State::Done(rules.clone());
        return rules;
    };
    if depth > MAX_AGGREGATION_DEPTH {
        // Not memoized: the top-level pass resolves this role again without the depth pressure.
        return Arc::from([]);
    }
    states[i] = State::InProgress;
    let mut parts: Vec<Rules> = Vec::new();
    for selector in selectors.iter().flatten() {
        for j in 0..raws.len() {
            if j != i && selector.matches(&raws[j].labels) {
                parts.push(resolve(j, raws, states, depth + 1, gathered));
            }
        }
    }
    let rules: Rules = union(&parts, gathered).map_or_else(
        || {
            // As a role kube's controller failed to write: it grants nothing more, here nothing at all.
            tracing::warn!("an aggregated ClusterRole gathers more rules than kgate holds for one; it grants nothing");
            Arc::from([])
        },
        Rules::from,
    );
    states[i] = State::Done(rules.clone());
    rules
}

/// The rules of `parts` without repeats, in order; `None` past [`UNION_LIMIT`] or, with what is
/// `gathered` already, past [`UNIONS_LIMIT`].
fn union(parts: &[Rules], gathered: &mut usize) -> Option<Vec<PolicyRule>> {
    let mut seen: HashSet<&PolicyRule> = HashSet::new();
    let mut out = Vec::new();
    let mut bytes = 0usize;
    for rule in parts.iter().flat_map(|p| p.iter()) {
        if seen.insert(rule) {
            bytes += size_of::<PolicyRule>() + rule.heap_size();
            if bytes > UNION_LIMIT || *gathered + bytes > UNIONS_LIMIT {
                return None;
            }
            out.push(rule.clone());
        }
    }
    *gathered += bytes;
    Some(out)
}

/// The rules of ClusterRole `name` among `objs` (every ClusterRole of a cluster), its aggregation resolved as
/// for authorization; `None` when there is no such role.
pub(crate) fn cluster_role_rules(objs: &[Value], name: &str) -> Option<Vec<PolicyRule>> {
    resolve_cluster_roles(objs).get(name).map(|r| r.to_vec())
}

/// Whether a ClusterRole gathers others' rules: it has an aggregation rule with selectors (an empty
/// list selects nothing, and kube does not count it).
pub(crate) fn aggregates(role: &Value) -> bool {
    role.pointer("/aggregationRule/clusterRoleSelectors").and_then(Value::as_array).is_some_and(|s| !s.is_empty())
}

pub(crate) use escalation::{confirm_no_escalation, full_authority};

impl RbacIndex {
    /// Build from lists of objects of each kind (as stored: JSON with metadata, rules, roleRef, subjects,
    /// aggregationRule). Malformed objects are ignored; bindings whose role does not exist grant nothing.
    pub fn build(
        roles: &[Value],
        cluster_roles: &[Value],
        role_bindings: &[Value],
        cluster_role_bindings: &[Value],
    ) -> RbacIndex {
        let cluster_rules = resolve_cluster_roles(cluster_roles);
        let mut role_rules: HashMap<&str, HashMap<&str, Rules>> = HashMap::new();
        for role in roles {
            let (Some(ns), Some(name)) = (meta_str(role, "namespace"), meta_str(role, "name")) else { continue };
            role_rules.entry(ns).or_default().insert(name, parse_rules(role.get("rules")).into());
        }

        let mut index = RbacIndex::default();
        for binding in cluster_role_bindings {
            // kube looks a Role reference up in namespace "" for ClusterRoleBindings, which never exists.
            let rules = match role_ref(binding) {
                Some(("ClusterRole", name)) => cluster_rules.get(name),
                _ => None,
            };
            if let Some(rules) = rules.filter(|r| !r.is_empty()) {
                index.cluster.add(rules.clone(), subject_keys(binding, ""));
            }
        }
        for binding in role_bindings {
            let Some(ns) = meta_str(binding, "namespace").filter(|ns| !ns.is_empty()) else { continue };
            let rules = match role_ref(binding) {
                Some(("ClusterRole", name)) => cluster_rules.get(name),
                Some(("Role", name)) => role_rules.get(ns).and_then(|m| m.get(name)),
                _ => None,
            };
            if let Some(rules) = rules.filter(|r| !r.is_empty()) {
                let subjects = subject_keys(binding, ns);
                index.namespaces.entry(ns.to_owned()).or_default().add(rules.clone(), subjects);
            }
        }
        index.namespaces.retain(|_, scope| !scope.bindings.is_empty());
        index.size = index.compute_size();
        index
    }

    fn compute_size(&self) -> usize {
        // Rules are shared between bindings; count each allocation once.
        let mut counted: HashSet<usize> = HashSet::new();
        let mut size = 0;
        let scopes = std::iter::once(&self.cluster).chain(self.namespaces.values());
        for scope in scopes {
            size += scope.heap_size();
            for rules in &scope.bindings {
                if counted.insert(Arc::as_ptr(rules) as *const PolicyRule as usize) {
                    size += 2 * size_of::<usize>()
                        + rules.len() * size_of::<PolicyRule>()
                        + rules.iter().map(PolicyRule::heap_size).sum::<usize>();
                }
            }
        }
        size + self.namespaces.capacity() * (size_of::<String>() + size_of::<Scope>() + size_of::<u64>())
            + self.namespaces.keys().map(String::capacity).sum::<usize>()
    }

    /// Whether the user may do the request.
    pub fn allows(&self, user: &User, req: &Request) -> bool {
        match *req {
            Request::Resource { verb, group, resource, subresource, namespace, name } => {
                let subresource = subresource.unwrap_or("");
                let name = name.unwrap_or("");
                let pred = |r: &PolicyRule| r.allows_resource(verb, group, resource, subresource, name);
                if self.cluster.any_rule(user, &pred) {
                    return true;
                }
                // Requests without a namespace (cluster-scoped or all-namespaces) only see ClusterRoleBindings.
                namespace
                    .filter(|ns| !ns.is_empty())
                    .and_then(|ns| self.namespaces.get(ns))
                    .is_some_and(|scope| scope.any_rule(user, &pred))
            }
            // Non-resource requests carry no namespace, so only ClusterRoleBindings can grant them.
            Request::NonResource { verb, path } => self.cluster.any_rule(user, &|r| r.allows_non_resource(verb, path)),
        }
    }

    /// Every rule the user holds in `namespace` (cluster-wide ones, then that namespace's), as kube's rule
    /// resolver gathers them for escalation checks; `None` for cluster-wide only.
    pub(crate) fn rules_of(&self, user: &User, namespace: Option<&str>) -> Vec<PolicyRule> {
        let ns_scope = namespace.filter(|ns| !ns.is_empty()).and_then(|ns| self.namespaces.get(ns));
        let mut out = Vec::new();
        for scope in std::iter::once(&self.cluster).chain(ns_scope) {
            for pos in scope.sorted_positions(user) {
                out.extend(scope.bindings.get(pos as usize).into_iter().flat_map(|r| r.iter().cloned()));
            }
        }
        out
    }

    /// SelfSubjectRulesReview: the resource and non-resource rules the user has in `namespace` (namespace-bound +
    /// cluster-wide), as JSON arrays shaped like `status.resourceRules` / `status.nonResourceRules`
    /// ([{verbs, apiGroups, resources, resourceNames}], [{verbs, nonResourceURLs}]).
    ///
    /// Like kube, rules come from ClusterRoleBindings first, then RoleBindings, unmerged and undeduplicated.
    pub fn rules_for(&self, user: &User, namespace: &str) -> (Vec<Value>, Vec<Value>) {
        let mut resource_rules = Vec::new();
        let mut non_resource_rules = Vec::new();
        let ns_scope = if namespace.is_empty() { None } else { self.namespaces.get(namespace) };
        for scope in std::iter::once(&self.cluster).chain(ns_scope) {
            for pos in scope.sorted_positions(user) {
                for rule in scope.bindings.get(pos as usize).into_iter().flat_map(|r| r.iter()) {
                    if !rule.resources.is_empty() {
                        resource_rules.push(rule.to_resource_rule());
                    }
                    if !rule.non_resource_urls.is_empty() {
                        non_resource_rules.push(rule.to_non_resource_rule());
                    }
                }
            }
        }
        (resource_rules, non_resource_rules)
    }

    /// Approximate heap size in bytes (the caller bounds a per-cluster cache with it).
    pub fn size_bytes(&self) -> usize {
        self.size
    }
}
