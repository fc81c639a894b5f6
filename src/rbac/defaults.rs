//! The bootstrap ClusterRoles and ClusterRoleBindings of kube-apiserver's RBAC policy, restricted to the roles and
//! resources kgate serves.

use serde_json::{json, Map, Value};

const API_VERSION: &str = "rbac.authorization.k8s.io/v1";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const AGGREGATE_TO_ADMIN: &str = "rbac.authorization.k8s.io/aggregate-to-admin";
const AGGREGATE_TO_EDIT: &str = "rbac.authorization.k8s.io/aggregate-to-edit";
const AGGREGATE_TO_VIEW: &str = "rbac.authorization.k8s.io/aggregate-to-view";

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"];

const CORE: &str = "";
const APPS: &str = "apps";
const AUTOSCALING: &str = "autoscaling";
const DISCOVERY: &str = "discovery.k8s.io";
const BATCH: &str = "batch";
const POLICY: &str = "policy";
const NETWORKING: &str = "networking.k8s.io";
const AUTHORIZATION: &str = "authorization.k8s.io";
const AUTHENTICATION: &str = "authentication.k8s.io";

fn rule(verbs: &[&str], group: &str, resources: &[&str]) -> Value {
    json!({ "verbs": verbs, "apiGroups": [group], "resources": resources })
}

fn url_rule(verbs: &[&str], urls: &[&str]) -> Value {
    json!({ "verbs": verbs, "nonResourceURLs": urls })
}

/// Metadata every bootstrap object carries; `autoupdate` is what kube's reconciler keys on.
fn metadata(name: &str, extra_labels: &[(&str, &str)]) -> Value {
    let mut labels = Map::new();
    labels.insert("kubernetes.io/bootstrapping".into(), "rbac-defaults".into());
    for (k, v) in extra_labels {
        labels.insert((*k).into(), (*v).into());
    }
    json!({
        "name": name,
        "labels": labels,
        "annotations": { "rbac.authorization.kubernetes.io/autoupdate": "true" },
    })
}

fn cluster_role(name: &str, labels: &[(&str, &str)], rules: Vec<Value>) -> Value {
    json!({ "apiVersion": API_VERSION, "kind": "ClusterRole", "metadata": metadata(name, labels), "rules": rules })
}

/// An aggregated role; kube stores `rules: null` until its controller fills them in, we compute them instead.
fn aggregated_role(name: &str, labels: &[(&str, &str)], selects: &str) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterRole",
        "metadata": metadata(name, labels),
        "aggregationRule": { "clusterRoleSelectors": [ { "matchLabels": { selects: "true" } } ] },
        "rules": null,
    })
}

/// The default ClusterRoles every logical cluster starts with, as kube-apiserver's bootstrap policy defines them
/// (cluster-admin; admin, edit, view as aggregated roles with the aggregate-to-* labels, plus the concrete
/// `system:aggregate-to-admin`, `system:aggregate-to-edit`, `system:aggregate-to-view` ClusterRoles carrying the
/// verbs kube gives them for the built-in resources kgate serves; and `system:basic-user`/`system:discovery`/
/// `system:public-info-viewer` with their nonResourceURLs and selfsubject*reviews rules). Full JSON objects.
pub fn default_cluster_roles() -> Vec<Value> {
    vec![
        cluster_role(
            "cluster-admin",
            &[],
            vec![json!({ "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"] }), url_rule(&["*"], &["*"])],
        ),
        cluster_role(
            "system:discovery",
            &[],
            vec![url_rule(
                &["get"],
                &[
                    "/livez",
                    "/readyz",
                    "/healthz",
                    "/version",
                    "/version/",
                    "/openapi",
                    "/openapi/*",
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                ],
            )],
        ),
        cluster_role(
            "system:basic-user",
            &[],
            vec![
                rule(&["create"], AUTHORIZATION, &["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
                rule(&["create"], AUTHENTICATION, &["selfsubjectreviews"]),
            ],
        ),
        cluster_role(
            "system:auth-delegator",
            &[],
            vec![
                rule(&["create"], AUTHENTICATION, &["tokenreviews"]),
                rule(&["create"], AUTHORIZATION, &["subjectaccessreviews"]),
            ],
        ),
        cluster_role(
            "system:public-info-viewer",
            &[],
            vec![url_rule(&["get"], &["/livez", "/readyz", "/healthz", "/version", "/version/"])],
        ),
        aggregated_role("admin", &[], AGGREGATE_TO_ADMIN),
        aggregated_role("edit", &[(AGGREGATE_TO_ADMIN, "true")], AGGREGATE_TO_EDIT),
        aggregated_role("view", &[(AGGREGATE_TO_EDIT, "true")], AGGREGATE_TO_VIEW),
        cluster_role(
            "system:aggregate-to-admin",
            &[(AGGREGATE_TO_ADMIN, "true")],
            vec![rule(READ_WRITE, RBAC_GROUP, &["roles", "rolebindings"])],
        ),
        cluster_role("system:aggregate-to-edit", &[(AGGREGATE_TO_EDIT, "true")], edit_rules()),
        cluster_role("system:aggregate-to-view", &[(AGGREGATE_TO_VIEW, "true")], view_rules()),
    ]
}

/// kube's `system:aggregate-to-edit` rules minus resources kgate does not serve (replicationcontrollers,
/// the extensions group). As in kube since 1.22, editors may not write Endpoints or EndpointSlices,
/// which would let them point a Service anywhere.
fn edit_rules() -> Vec<Value> {
    vec![
        // Escalating resources are readable by editors but deliberately not by viewers.
        rule(READ, CORE, &["pods/attach", "pods/proxy", "pods/exec", "pods/portforward", "secrets", "services/proxy"]),
        rule(&["impersonate"], CORE, &["serviceaccounts"]),
        rule(WRITE, CORE, &["pods", "pods/attach", "pods/proxy", "pods/exec", "pods/portforward"]),
        rule(&["create"], CORE, &["pods/eviction"]),
        rule(
            WRITE,
            CORE,
            &["serviceaccounts", "services", "services/proxy", "persistentvolumeclaims", "configmaps", "secrets"],
        ),
        rule(&["create"], CORE, &["serviceaccounts/token"]),
        rule(
            WRITE,
            APPS,
            &[
                "statefulsets",
                "statefulsets/scale",
                "daemonsets",
                "deployments",
                "deployments/scale",
                "deployments/rollback",
                "replicasets",
                "replicasets/scale",
            ],
        ),
        rule(WRITE, AUTOSCALING, &["horizontalpodautoscalers"]),
        rule(WRITE, BATCH, &["jobs", "cronjobs"]),
        rule(WRITE, POLICY, &["poddisruptionbudgets"]),
        rule(WRITE, NETWORKING, &["networkpolicies", "ingresses"]),
    ]
}

/// kube's `system:aggregate-to-view` rules minus resources kgate does not serve.
fn view_rules() -> Vec<Value> {
    vec![
        rule(
            READ,
            CORE,
            &[
                "pods",
                "serviceaccounts",
                "services",
                "services/status",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "configmaps",
            ],
        ),
        rule(
            READ,
            CORE,
            &[
                "limitranges",
                "resourcequotas",
                "events",
                "pods/status",
                "resourcequotas/status",
                "namespaces/status",
                "pods/log",
            ],
        ),
        // Reading namespaces at namespace scope lets a user read *this* namespace, a hint of where they have access.
        rule(READ, CORE, &["namespaces"]),
        rule(
            READ,
            APPS,
            &[
                "controllerrevisions",
                "statefulsets",
                "statefulsets/status",
                "statefulsets/scale",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/status",
                "deployments/scale",
                "replicasets",
                "replicasets/status",
                "replicasets/scale",
            ],
        ),
        rule(READ, AUTOSCALING, &["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
        rule(READ, BATCH, &["jobs", "cronjobs", "cronjobs/status", "jobs/status"]),
        rule(READ, POLICY, &["poddisruptionbudgets", "poddisruptionbudgets/status"]),
        rule(READ, NETWORKING, &["networkpolicies", "ingresses", "ingresses/status"]),
        rule(READ, DISCOVERY, &["endpointslices"]),
    ]
}

fn cluster_role_binding(role: &str, groups: &[&str]) -> Value {
    let subjects: Vec<Value> =
        groups.iter().map(|g| json!({ "apiGroup": RBAC_GROUP, "kind": "Group", "name": g })).collect();
    json!({
        "apiVersion": API_VERSION,
        "kind": "ClusterRoleBinding",
        "metadata": metadata(role, &[]),
        "roleRef": { "apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role },
        "subjects": subjects,
    })
}

/// The ClusterRoleBindings kube creates for the default roles (cluster-admin -> group system:masters;
/// system:discovery, system:basic-user -> group system:authenticated; system:public-info-viewer ->
/// system:authenticated and system:unauthenticated). Full JSON objects.
pub fn default_cluster_role_bindings() -> Vec<Value> {
    vec![
        cluster_role_binding("cluster-admin", &["system:masters"]),
        cluster_role_binding("system:discovery", &["system:authenticated"]),
        cluster_role_binding("system:basic-user", &["system:authenticated"]),
        cluster_role_binding("system:public-info-viewer", &["system:authenticated", "system:unauthenticated"]),
    ]
}
