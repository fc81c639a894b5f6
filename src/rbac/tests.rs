//! Unit tests of RBAC evaluation, aggregation and the bootstrap policy.

use super::*;
use serde_json::json;

fn user(name: &str, groups: &[&str]) -> User {
    User { name: name.into(), groups: groups.iter().map(|g| (*g).to_owned()).collect() }
}

/// An authenticated user, as the authenticator would hand it over.
fn authed(name: &str) -> User {
    user(name, &["system:authenticated"])
}

fn res<'a>(verb: &'a str, group: &'a str, resource: &'a str, namespace: Option<&'a str>) -> Request<'a> {
    Request::Resource { verb, group, resource, subresource: None, namespace, name: None }
}

fn named<'a>(verb: &'a str, group: &'a str, resource: &'a str, ns: &'a str, name: &'a str) -> Request<'a> {
    Request::Resource { verb, group, resource, subresource: None, namespace: Some(ns), name: Some(name) }
}

fn sub<'a>(verb: &'a str, resource: &'a str, subresource: &'a str, ns: &'a str) -> Request<'a> {
    Request::Resource {
        verb,
        group: "",
        resource,
        subresource: Some(subresource),
        namespace: Some(ns),
        name: Some("p"),
    }
}

fn url<'a>(verb: &'a str, path: &'a str) -> Request<'a> {
    Request::NonResource { verb, path }
}

fn role(ns: &str, name: &str, rules: Value) -> Value {
    json!({ "kind": "Role", "metadata": { "namespace": ns, "name": name }, "rules": rules })
}

fn cluster_role(name: &str, rules: Value) -> Value {
    json!({ "kind": "ClusterRole", "metadata": { "name": name }, "rules": rules })
}

fn role_binding(ns: &str, name: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({
        "kind": "RoleBinding",
        "metadata": { "namespace": ns, "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role },
        "subjects": subjects,
    })
}

fn cluster_role_binding(name: &str, role: &str, subjects: Value) -> Value {
    json!({
        "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
        "subjects": subjects,
    })
}

fn user_subject(name: &str) -> Value {
    json!([{ "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": name }])
}

/// The defaults plus extra objects.
fn with_defaults(roles: &[Value], crs: &[Value], rbs: &[Value], crbs: &[Value]) -> RbacIndex {
    let mut all_crs = default_cluster_roles();
    all_crs.extend_from_slice(crs);
    let mut all_crbs = default_cluster_role_bindings();
    all_crbs.extend_from_slice(crbs);
    RbacIndex::build(roles, &all_crs, rbs, &all_crbs)
}

/// A RoleBinding of a default role to `alice` in namespace `ns`.
fn default_role_for_alice(role: &str) -> RbacIndex {
    with_defaults(&[], &[], &[role_binding("ns", "b", "ClusterRole", role, user_subject("alice"))], &[])
}

#[test]
fn user_group_and_service_account_subjects() {
    let reader = role("ns", "reader", json!([{ "verbs": ["get"], "apiGroups": [""], "resources": ["pods"] }]));
    let rbs = [
        role_binding("ns", "u", "Role", "reader", user_subject("alice")),
        role_binding("ns", "g", "Role", "reader", json!([{ "kind": "Group", "name": "devs" }])),
        role_binding(
            "ns",
            "sa",
            "Role",
            "reader",
            json!([{ "kind": "ServiceAccount", "namespace": "ci", "name": "bot" }]),
        ),
        // Without a namespace a ServiceAccount subject means the binding's namespace.
        role_binding("ns", "sa-local", "Role", "reader", json!([{ "kind": "ServiceAccount", "name": "local" }])),
    ];
    let idx = RbacIndex::build(&[reader], &[], &rbs, &[]);
    let get = res("get", "", "pods", Some("ns"));
    assert!(idx.allows(&user("alice", &[]), &get));
    assert!(!idx.allows(&user("bob", &[]), &get));
    assert!(idx.allows(&user("bob", &["devs"]), &get));
    assert!(!idx.allows(&user("devs", &[]), &get), "a group subject must not match a user of that name");
    assert!(idx.allows(&user("system:serviceaccount:ci:bot", &[]), &get));
    assert!(!idx.allows(&user("system:serviceaccount:other:bot", &[]), &get));
    assert!(idx.allows(&user("system:serviceaccount:ns:local", &[]), &get));
    assert!(!idx.allows(&user("alice", &[]), &res("list", "", "pods", Some("ns"))));
    assert!(!idx.allows(&user("alice", &[]), &res("get", "", "pods", Some("other"))));
}

#[test]
fn service_account_groups_from_authenticator_match_group_subjects() {
    let cr = cluster_role("r", json!([{ "verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"] }]));
    let crb = cluster_role_binding("b", "r", json!([{ "kind": "Group", "name": "system:serviceaccounts:ci" }]));
    let idx = RbacIndex::build(&[], &[cr], &[], &[crb]);
    let sa = user("system:serviceaccount:ci:x", &["system:serviceaccounts", "system:serviceaccounts:ci"]);
    assert!(idx.allows(&sa, &res("list", "", "configmaps", None)));
    let other = user("system:serviceaccount:cd:x", &["system:serviceaccounts", "system:serviceaccounts:cd"]);
    assert!(!idx.allows(&other, &res("list", "", "configmaps", None)));
}

#[test]
fn cluster_role_binding_service_account_needs_namespace() {
    let cr = cluster_role("r", json!([{ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"] }]));
    let crb = cluster_role_binding("b", "r", json!([{ "kind": "ServiceAccount", "name": "bot" }]));
    let idx = RbacIndex::build(&[], &[cr], &[], &[crb]);
    assert!(!idx.allows(&user("system:serviceaccount::bot", &[]), &res("get", "", "pods", Some("ns"))));
}

#[test]
fn role_binding_to_cluster_role_grants_only_in_its_namespace() {
    let cr =
        cluster_role("pod-reader", json!([{ "verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"] }]));
    let rb = role_binding("team", "b", "ClusterRole", "pod-reader", user_subject("alice"));
    let idx = RbacIndex::build(&[], &[cr], &[rb], &[]);
    let alice = user("alice", &[]);
    assert!(idx.allows(&alice, &res("list", "", "pods", Some("team"))));
    assert!(!idx.allows(&alice, &res("list", "", "pods", Some("other"))));
    assert!(!idx.allows(&alice, &res("list", "", "pods", None)), "all-namespaces list needs a cluster binding");
    assert!(!idx.allows(&alice, &res("list", "", "pods", Some(""))));
}

#[test]
fn missing_or_unsupported_role_refs_grant_nothing() {
    let any = json!([{ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"] }]);
    let rbs = [
        role_binding("ns", "missing", "ClusterRole", "nope", user_subject("alice")),
        role_binding("ns", "missing-role", "Role", "nope", user_subject("alice")),
        // A Role in another namespace is not visible to this binding.
        role_binding("ns", "foreign", "Role", "elsewhere", user_subject("alice")),
        role_binding("ns", "kind", "Group", "all", user_subject("alice")),
        json!({ "metadata": { "namespace": "ns", "name": "noref" }, "subjects": user_subject("alice") }),
    ];
    let crbs = [
        json!({ "metadata": { "name": "role" }, "roleRef": { "kind": "Role", "name": "elsewhere" }, "subjects": user_subject("alice") }),
        cluster_role_binding("missing", "nope", user_subject("alice")),
    ];
    let roles = [role("other", "elsewhere", any.clone())];
    let idx = RbacIndex::build(&roles, &[cluster_role("all", any)], &rbs, &crbs);
    assert!(!idx.allows(&user("alice", &[]), &res("get", "", "pods", Some("ns"))));
    assert!(!idx.allows(&user("alice", &[]), &url("get", "/healthz")));
}

#[test]
fn malformed_objects_are_ignored() {
    let good = cluster_role("r", json!([{ "verbs": ["get"], "apiGroups": [""], "resources": ["pods"] }]));
    let crs = [
        json!(null),
        json!("x"),
        json!({ "metadata": { "name": 5 } }),
        json!({ "metadata": { "name": "bad-rules" }, "rules": "nope" }),
        json!({ "metadata": { "name": "bad-items" }, "rules": [1, null, { "verbs": "get" }, { "verbs": [1, "get"], "apiGroups": [""], "resources": ["secrets"] }] }),
        json!({ "metadata": { "name": "bad-agg" }, "aggregationRule": { "clusterRoleSelectors": [{ "matchExpressions": [{ "key": "a", "operator": "Bogus" }] }, 7] } }),
        good,
    ];
    let crbs = [
        json!([]),
        json!({ "roleRef": 3 }),
        cluster_role_binding(
            "b",
            "r",
            json!([7, { "kind": "User" }, { "kind": "User", "name": "alice" }, { "kind": "Robot", "name": "alice" }]),
        ),
        cluster_role_binding("c", "bad-items", json!({ "kind": "User", "name": "alice" })),
        cluster_role_binding("d", "bad-items", user_subject("carol")),
        cluster_role_binding("e", "bad-agg", user_subject("carol")),
    ];
    let idx = RbacIndex::build(&[json!({ "metadata": {} })], &crs, &[json!(1)], &crbs);
    assert!(idx.allows(&user("alice", &[]), &res("get", "", "pods", Some("ns"))));
    assert!(!idx.allows(&user("alice", &[]), &res("get", "", "secrets", Some("ns"))));
    // The salvageable rule of bad-items still applies: non-string verbs are dropped, not the whole rule.
    assert!(idx.allows(&user("carol", &[]), &res("get", "", "secrets", Some("ns"))));
    assert!(!idx.allows(&user("carol", &[]), &res("get", "", "pods", Some("ns"))));
}

#[test]
fn wildcards_for_verbs_groups_and_resources() {
    let crs = [
        cluster_role("verbs", json!([{ "verbs": ["*"], "apiGroups": ["apps"], "resources": ["deployments"] }])),
        cluster_role("groups", json!([{ "verbs": ["get"], "apiGroups": ["*"], "resources": ["widgets"] }])),
        cluster_role("resources", json!([{ "verbs": ["list"], "apiGroups": ["batch"], "resources": ["*"] }])),
    ];
    let crbs = [
        cluster_role_binding("a", "verbs", user_subject("alice")),
        cluster_role_binding("b", "groups", user_subject("alice")),
        cluster_role_binding("c", "resources", user_subject("alice")),
    ];
    let idx = RbacIndex::build(&[], &crs, &[], &crbs);
    let alice = user("alice", &[]);
    for verb in ["get", "create", "deletecollection", "escalate"] {
        assert!(idx.allows(&alice, &res(verb, "apps", "deployments", Some("ns"))), "{verb}");
    }
    assert!(!idx.allows(&alice, &res("get", "extensions", "deployments", Some("ns"))));
    assert!(idx.allows(&alice, &res("get", "example.com", "widgets", None)));
    assert!(idx.allows(&alice, &res("get", "", "widgets", None)));
    assert!(!idx.allows(&alice, &res("list", "example.com", "widgets", None)));
    assert!(idx.allows(&alice, &res("list", "batch", "jobs", Some("x"))));
    assert!(idx.allows(&alice, &sub_in("list", "batch", "jobs", "status")), "`*` covers subresources");
    assert!(!idx.allows(&alice, &res("get", "batch", "jobs", Some("x"))));
}

fn sub_in<'a>(verb: &'a str, group: &'a str, resource: &'a str, subresource: &'a str) -> Request<'a> {
    Request::Resource { verb, group, resource, subresource: Some(subresource), namespace: Some("ns"), name: None }
}

#[test]
fn subresources() {
    let crs = [
        cluster_role("logs", json!([{ "verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"] }])),
        cluster_role("status", json!([{ "verbs": ["update"], "apiGroups": ["*"], "resources": ["*/status"] }])),
        cluster_role("literal", json!([{ "verbs": ["get"], "apiGroups": [""], "resources": ["services/*"] }])),
    ];
    let crbs = [
        cluster_role_binding("a", "logs", user_subject("alice")),
        cluster_role_binding("b", "status", user_subject("bob")),
        cluster_role_binding("c", "literal", user_subject("carol")),
    ];
    let idx = RbacIndex::build(&[], &crs, &[], &crbs);
    let (alice, bob, carol) = (user("alice", &[]), user("bob", &[]), user("carol", &[]));
    assert!(idx.allows(&alice, &sub("get", "pods", "log", "ns")));
    assert!(!idx.allows(&alice, &named("get", "", "pods", "ns", "p")), "pods/log does not grant pods");
    assert!(!idx.allows(&alice, &sub("get", "pods", "exec", "ns")));
    assert!(!idx.allows(&alice, &sub("get", "pods", "logs", "ns")));
    assert!(idx.allows(&bob, &sub("update", "pods", "status", "ns")));
    assert!(idx.allows(&bob, &sub_in("update", "apps", "deployments", "status")));
    assert!(!idx.allows(&bob, &sub("update", "pods", "xstatus", "ns")));
    assert!(!idx.allows(&bob, &res("update", "", "pods", Some("ns"))), "*/status does not grant the parent");
    // kube has no `resource/*` wildcard: it only matches a subresource literally named `*`.
    assert!(!idx.allows(&carol, &sub("get", "services", "proxy", "ns")));
    assert!(idx.allows(&carol, &sub("get", "services", "*", "ns")));
}

#[test]
fn resource_names() {
    let cr = cluster_role(
        "one-cm",
        json!([{ "verbs": ["get", "list", "update"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["app", "db"] }]),
    );
    let idx =
        RbacIndex::build(&[], &[cr], &[role_binding("ns", "b", "ClusterRole", "one-cm", user_subject("alice"))], &[]);
    let alice = user("alice", &[]);
    assert!(idx.allows(&alice, &named("get", "", "configmaps", "ns", "app")));
    assert!(idx.allows(&alice, &named("update", "", "configmaps", "ns", "db")));
    assert!(!idx.allows(&alice, &named("get", "", "configmaps", "ns", "other")));
    // Requests without a name (list, create) are not covered by a rule with resourceNames.
    assert!(!idx.allows(&alice, &res("list", "", "configmaps", Some("ns"))));
    assert!(!idx.allows(&alice, &named("get", "", "configmaps", "elsewhere", "app")));
}

#[test]
fn non_resource_urls() {
    let cr = cluster_role(
        "urls",
        json!([
            { "verbs": ["get"], "nonResourceURLs": ["/healthz", "/metrics/*", "/logs**"] },
            { "verbs": ["post"], "nonResourceURLs": ["*"] },
        ]),
    );
    let crb = cluster_role_binding("b", "urls", user_subject("alice"));
    let rb_role = cluster_role("ns-urls", json!([{ "verbs": ["get"], "nonResourceURLs": ["*"] }]));
    let rb = role_binding("ns", "b", "ClusterRole", "ns-urls", user_subject("bob"));
    let idx = RbacIndex::build(&[], &[cr, rb_role], &[rb], &[crb]);
    let alice = user("alice", &[]);
    assert!(idx.allows(&alice, &url("get", "/healthz")));
    assert!(!idx.allows(&alice, &url("get", "/healthz/etcd")));
    assert!(idx.allows(&alice, &url("get", "/metrics/")));
    assert!(idx.allows(&alice, &url("get", "/metrics/slis")));
    assert!(!idx.allows(&alice, &url("get", "/metrics")));
    assert!(idx.allows(&alice, &url("get", "/logs/kube")));
    assert!(idx.allows(&alice, &url("post", "/anything")));
    assert!(!idx.allows(&alice, &url("put", "/healthz")));
    // A non-resource rule never grants a resource request and vice versa.
    assert!(!idx.allows(&alice, &res("post", "", "pods", Some("ns"))));
    // nonResourceURLs reached through a RoleBinding grant nothing.
    assert!(!idx.allows(&user("bob", &[]), &url("get", "/healthz")));
}

#[test]
fn aggregation_with_selectors() {
    let crs = [
        json!({
            "metadata": { "name": "agg" },
            "aggregationRule": { "clusterRoleSelectors": [
                { "matchLabels": { "team": "a" } },
                { "matchExpressions": [
                    { "key": "tier", "operator": "In", "values": ["gold", "silver"] },
                    { "key": "legacy", "operator": "DoesNotExist" },
                ] },
                { "matchExpressions": [ { "key": "extra", "operator": "Exists" }, { "key": "env", "operator": "NotIn", "values": ["prod"] } ] },
            ] },
            // Stored rules of an aggregated role are the controller's output; they are recomputed, not trusted.
            "rules": [{ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"] }],
        }),
        json!({ "metadata": { "name": "a", "labels": { "team": "a" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["pods"] }] }),
        json!({ "metadata": { "name": "gold", "labels": { "tier": "gold" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["secrets"] }] }),
        json!({ "metadata": { "name": "old", "labels": { "tier": "gold", "legacy": "y" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["nodes"] }] }),
        json!({ "metadata": { "name": "bronze", "labels": { "tier": "bronze" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["events"] }] }),
        json!({ "metadata": { "name": "x-dev", "labels": { "extra": "1", "env": "dev" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["services"] }] }),
        json!({ "metadata": { "name": "x-nolabel", "labels": { "extra": "1" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["endpoints"] }] }),
        json!({ "metadata": { "name": "x-prod", "labels": { "extra": "1", "env": "prod" } }, "rules": [{ "verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"] }] }),
    ];
    let idx = RbacIndex::build(&[], &crs, &[], &[cluster_role_binding("b", "agg", user_subject("alice"))]);
    let alice = user("alice", &[]);
    let can = |r: &str| idx.allows(&alice, &res("get", "", r, Some("ns")));
    assert!(can("pods") && can("secrets") && can("services") && can("endpoints"));
    assert!(!can("nodes") && !can("events") && !can("configmaps"));
    assert!(!idx.allows(&alice, &res("delete", "", "pods", Some("ns"))));
}

#[test]
fn aggregation_cycles_terminate_and_duplicates_are_dropped() {
    let rule = json!([{ "verbs": ["get"], "apiGroups": [""], "resources": ["pods"] }]);
    let crs = [
        json!({ "metadata": { "name": "a", "labels": { "x": "1" } }, "aggregationRule": { "clusterRoleSelectors": [{ "matchLabels": { "x": "1" } }] } }),
        json!({ "metadata": { "name": "b", "labels": { "x": "1" } }, "aggregationRule": { "clusterRoleSelectors": [{ "matchLabels": { "x": "1" } }] } }),
        json!({ "metadata": { "name": "c", "labels": { "x": "1" } }, "rules": rule }),
        json!({ "metadata": { "name": "d", "labels": { "x": "1" } }, "rules": rule }),
        // An empty selector selects every ClusterRole, itself excluded.
        json!({ "metadata": { "name": "everything" }, "aggregationRule": { "clusterRoleSelectors": [{}] } }),
    ];
    let crbs = [
        cluster_role_binding("a", "a", user_subject("alice")),
        cluster_role_binding("b", "b", user_subject("bob")),
        cluster_role_binding("e", "everything", user_subject("eve")),
    ];
    let idx = RbacIndex::build(&[], &crs, &[], &crbs);
    for name in ["alice", "bob", "eve"] {
        assert!(idx.allows(&user(name, &[]), &res("get", "", "pods", Some("ns"))), "{name}");
    }
    let (rules, _) = idx.rules_for(&user("alice", &[]), "ns");
    assert_eq!(rules.len(), 1, "identical rules from c and d are aggregated once: {rules:?}");
}

#[test]
fn aggregated_roles_gather_within_a_bound_in_bytes() {
    // One large role and many aggregated roles selecting it: copies of it would multiply its size.
    let big: Vec<Value> = (0..5_000)
        .map(|i| json!({ "verbs": ["get"], "apiGroups": [""], "resources": [format!("things-{i:05}")] }))
        .collect();
    let mut crs = vec![json!({ "metadata": { "name": "big", "labels": { "x": "1" } }, "rules": big })];
    let gatherers = 200;
    for i in 0..gatherers {
        crs.push(json!({ "metadata": { "name": format!("g{i:03}") }, "aggregationRule": { "clusterRoleSelectors": [{ "matchLabels": { "x": "1" } }] } }));
    }
    let crbs: Vec<Value> = (0..gatherers)
        .map(|i| cluster_role_binding(&format!("b{i}"), &format!("g{i:03}"), user_subject(&format!("u{i}"))))
        .collect();
    let idx = RbacIndex::build(&[], &crs, &[], &crbs);
    let one = RbacIndex::build(&[], &crs[..2], &[], &crbs[..1]);
    assert!(one.size_bytes() > 500_000, "one union holds the big role: {}", one.size_bytes());
    // The first roles in name order gather it; the rest, past the cluster's bound, grant nothing.
    assert!(idx.size_bytes() < 20 << 20, "the unions stay within their bound: {} bytes", idx.size_bytes());
    let can = |i: usize| idx.allows(&user(&format!("u{i}"), &[]), &res("get", "", "things-00042", Some("ns")));
    assert!(can(0));
    assert!(!can(gatherers - 1));
    // A union past what one role may hold (kube's controller could not write it) grants nothing.
    let huge: Vec<Value> = (0..40_000)
        .map(|i| json!({ "verbs": ["get"], "apiGroups": [""], "resources": [format!("things-{i:05}")] }))
        .collect();
    let crs = [
        json!({ "metadata": { "name": "huge", "labels": { "x": "1" } }, "rules": huge }),
        json!({ "metadata": { "name": "g" }, "aggregationRule": { "clusterRoleSelectors": [{ "matchLabels": { "x": "1" } }] } }),
    ];
    let idx = RbacIndex::build(&[], &crs, &[], &[cluster_role_binding("b", "g", user_subject("u"))]);
    assert!(!idx.allows(&user("u", &[]), &res("get", "", "things-00042", Some("ns"))));
}

#[test]
fn view_reads_but_cannot_write_or_see_secrets() {
    let idx = default_role_for_alice("view");
    let alice = authed("alice");
    for verb in ["get", "list", "watch"] {
        assert!(idx.allows(&alice, &res(verb, "", "configmaps", Some("ns"))), "{verb}");
        assert!(idx.allows(&alice, &res(verb, "apps", "deployments", Some("ns"))), "{verb}");
    }
    assert!(idx.allows(&alice, &sub("get", "pods", "log", "ns")));
    assert!(!idx.allows(&alice, &res("get", "", "secrets", Some("ns"))));
    assert!(!idx.allows(&alice, &res("list", "", "secrets", Some("ns"))));
    assert!(!idx.allows(&alice, &res("create", "", "configmaps", Some("ns"))));
    assert!(!idx.allows(&alice, &sub("create", "pods", "exec", "ns")));
    assert!(!idx.allows(&alice, &res("get", "", "configmaps", Some("other"))));
}

#[test]
fn edit_writes_workloads_and_secrets_but_not_rbac() {
    let idx = default_role_for_alice("edit");
    let alice = authed("alice");
    assert!(idx.allows(&alice, &res("create", "apps", "deployments", Some("ns"))));
    assert!(idx.allows(&alice, &res("create", "", "secrets", Some("ns"))));
    assert!(idx.allows(&alice, &res("get", "", "secrets", Some("ns"))));
    assert!(idx.allows(&alice, &res("list", "", "configmaps", Some("ns"))), "edit includes view");
    assert!(idx.allows(&alice, &sub("create", "pods", "exec", "ns")));
    assert!(idx.allows(&alice, &sub("create", "serviceaccounts", "token", "ns")));
    assert!(idx.allows(&alice, &sub_in("update", "apps", "deployments", "scale")));
    assert!(!idx.allows(&alice, &sub_in("update", "apps", "deployments", "status")));
    assert!(!idx.allows(&alice, &res("create", "rbac.authorization.k8s.io", "roles", Some("ns"))));
    assert!(!idx.allows(&alice, &res("create", "rbac.authorization.k8s.io", "rolebindings", Some("ns"))));
    assert!(!idx.allows(&alice, &res("get", "rbac.authorization.k8s.io", "rolebindings", Some("ns"))));
}

#[test]
fn admin_manages_rbac_in_its_namespace() {
    let idx = default_role_for_alice("admin");
    let alice = authed("alice");
    assert!(idx.allows(&alice, &res("create", "rbac.authorization.k8s.io", "rolebindings", Some("ns"))));
    assert!(idx.allows(&alice, &res("delete", "rbac.authorization.k8s.io", "roles", Some("ns"))));
    assert!(idx.allows(&alice, &res("create", "", "secrets", Some("ns"))), "admin includes edit");
    assert!(idx.allows(&alice, &res("watch", "", "pods", Some("ns"))), "admin includes view via edit");
    assert!(!idx.allows(&alice, &res("create", "rbac.authorization.k8s.io", "rolebindings", Some("other"))));
    assert!(!idx.allows(&alice, &res("create", "rbac.authorization.k8s.io", "clusterroles", None)));
    assert!(!idx.allows(&alice, &res("delete", "", "namespaces", None)));
}

#[test]
fn cluster_admin_via_system_masters() {
    let idx = with_defaults(&[], &[], &[], &[]);
    let root = user("root", &["system:masters", "system:authenticated"]);
    assert!(idx.allows(&root, &res("delete", "", "namespaces", None)));
    assert!(idx.allows(&root, &res("escalate", "rbac.authorization.k8s.io", "clusterroles", None)));
    assert!(idx.allows(&root, &sub("create", "pods", "exec", "any")));
    assert!(idx.allows(&root, &res("list", "example.com", "widgets", Some("x"))));
    assert!(idx.allows(&root, &url("get", "/metrics")));
    assert!(idx.allows(&root, &url("post", "/anything/at/all")));
    assert!(!idx.allows(&user("root", &[]), &res("get", "", "pods", Some("x"))), "the group, not the name, grants");
}

#[test]
fn unbound_user_only_gets_discovery_and_self_reviews() {
    let idx = with_defaults(&[], &[], &[], &[]);
    let bob = authed("bob");
    for path in
        ["/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/healthz", "/livez", "/readyz", "/openapi/v3"]
    {
        assert!(idx.allows(&bob, &url("get", path)), "{path}");
    }
    assert!(!idx.allows(&bob, &url("get", "/metrics")));
    assert!(!idx.allows(&bob, &url("post", "/api")));
    let ssar = res("create", "authorization.k8s.io", "selfsubjectaccessreviews", None);
    assert!(idx.allows(&bob, &ssar));
    assert!(idx.allows(&bob, &res("create", "authorization.k8s.io", "selfsubjectrulesreviews", None)));
    assert!(idx.allows(&bob, &res("create", "authentication.k8s.io", "selfsubjectreviews", None)));
    assert!(!idx.allows(&bob, &res("create", "authorization.k8s.io", "subjectaccessreviews", None)));
    assert!(!idx.allows(&bob, &res("get", "", "pods", Some("default"))));
    assert!(!idx.allows(&bob, &res("list", "", "namespaces", None)));

    // Anonymous requests only get the public info endpoints.
    let anon = user("system:anonymous", &["system:unauthenticated"]);
    assert!(idx.allows(&anon, &url("get", "/healthz")));
    assert!(idx.allows(&anon, &url("get", "/version")));
    assert!(!idx.allows(&anon, &url("get", "/api")));
    assert!(!idx.allows(&anon, &ssar));
}

#[test]
fn rules_for_a_view_user() {
    let idx = default_role_for_alice("view");
    let alice = authed("alice");
    let (resource_rules, non_resource_rules) = idx.rules_for(&alice, "ns");
    // Cluster-wide rules come first, then the namespace's.
    assert_eq!(
        resource_rules[0],
        json!({ "verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"] })
    );
    let configmaps = json!({
        "verbs": ["get", "list", "watch"],
        "apiGroups": [""],
        "resources": ["pods", "serviceaccounts", "services", "services/status", "endpoints",
            "persistentvolumeclaims", "persistentvolumeclaims/status", "configmaps"],
    });
    assert!(resource_rules.contains(&configmaps), "{resource_rules:?}");
    assert!(resource_rules.iter().all(|r| r["verbs"] != json!(["*"])));
    assert!(!resource_rules.iter().any(|r| r["resources"].as_array().unwrap().contains(&json!("secrets"))));
    assert!(non_resource_rules.iter().all(|r| r["verbs"] == json!(["get"]) && r["nonResourceURLs"].is_array()));
    assert!(non_resource_rules.iter().any(|r| r["nonResourceURLs"].as_array().unwrap().contains(&json!("/apis/*"))));
    let view_count = default_cluster_roles()
        .iter()
        .find(|r| r["metadata"]["name"] == "system:aggregate-to-view")
        .map(|r| r["rules"].as_array().unwrap().len())
        .unwrap();
    assert_eq!(resource_rules.len(), 2 + view_count, "basic-user (2 rules) + view");

    // In another namespace only the cluster-wide rules remain.
    let (elsewhere, _) = idx.rules_for(&alice, "other");
    assert_eq!(elsewhere.len(), 2);
    let (none, none_urls) = idx.rules_for(&user("nobody", &[]), "ns");
    assert!(none.is_empty() && none_urls.is_empty());
}

#[test]
fn rules_for_keeps_resource_names_and_lists_each_binding_once() {
    let cr = cluster_role(
        "r",
        json!([{ "verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"] }]),
    );
    let rb = role_binding(
        "ns",
        "b",
        "ClusterRole",
        "r",
        json!([{ "kind": "User", "name": "alice" }, { "kind": "Group", "name": "g" }]),
    );
    let idx = RbacIndex::build(&[], &[cr], &[rb], &[]);
    let (rules, urls) = idx.rules_for(&user("alice", &["g"]), "ns");
    assert_eq!(
        rules,
        vec![json!({ "verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"] })]
    );
    assert!(urls.is_empty());
}

#[test]
fn defaults_are_well_formed() {
    let roles = default_cluster_roles();
    let bindings = default_cluster_role_bindings();
    for obj in roles.iter().chain(&bindings) {
        assert_eq!(obj["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(obj["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
        assert!(obj["metadata"]["name"].is_string());
    }
    assert!(roles.iter().all(|r| r["kind"] == "ClusterRole"));
    assert!(bindings.iter().all(|b| b["kind"] == "ClusterRoleBinding"));
    let names: Vec<&str> = roles.iter().filter_map(|r| r["metadata"]["name"].as_str()).collect();
    for n in ["cluster-admin", "admin", "edit", "view", "system:aggregate-to-admin", "system:aggregate-to-edit"] {
        assert!(names.contains(&n), "{n}");
    }
    let edit = roles.iter().find(|r| r["metadata"]["name"] == "edit").unwrap();
    assert_eq!(edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"], "true");
    // Every binding references a default role.
    assert!(bindings.iter().all(|b| names.contains(&b["roleRef"]["name"].as_str().unwrap())));
}

#[test]
fn size_grows_with_content() {
    let empty = RbacIndex::build(&[], &[], &[], &[]);
    let defaults = with_defaults(&[], &[], &[], &[]);
    assert!(defaults.size_bytes() > empty.size_bytes());
    let rbs: Vec<Value> = (0..50)
        .map(|i| role_binding(&format!("ns{i}"), "b", "ClusterRole", "view", user_subject(&format!("user{i}"))))
        .collect();
    let one = with_defaults(&[], &[], &rbs[..1], &[]);
    let fifty = with_defaults(&[], &[], &rbs, &[]);
    assert!(one.size_bytes() > defaults.size_bytes());
    // Bindings of the same role share its rules, so each further binding costs less than the first one did.
    let first = one.size_bytes() - defaults.size_bytes();
    let each_further = (fifty.size_bytes() - one.size_bytes()) / 49;
    assert!(each_further < first, "{each_further} vs {first}");
}
