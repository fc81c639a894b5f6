//! Unit tests of kube's type checks and update rules, through `errors` and `update_errors`.

use super::*;
use serde_json::json;

fn holds_all(got: &[String], wants: &[&str]) {
    for want in wants {
        assert!(got.iter().any(|g| g == want), "{want} in {got:?}");
    }
}

fn messages(api_version: &str, kind: &str, obj: Value) -> Vec<String> {
    errors(api_version, kind, &obj, None).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
}

#[test]
fn a_pod_spec_is_checked_wherever_it_is() {
    let spec = json!({"containers": [{"name": "Web", "ports": [{"containerPort": 70000, "protocol": "TCP"}]},
        {"name": "sidecar", "image": "busybox"}], "initContainers": [{"name": "sidecar", "image": "x"}],
        "restartPolicy": "Sometimes", "dnsPolicy": "ClusterFirst"});
    let pod = json!({"metadata": {"name": "p"}, "spec": spec});
    let got = messages("v1", "Pod", pod);
    holds_all(
        &got,
        &[
            "spec.initContainers[0].name: Duplicate value: \"sidecar\"",
            "spec.restartPolicy: Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\"",
            "spec.containers[0].image: Required value",
            "spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
        ],
    );
    assert!(got
        .iter()
        .any(|g| g.starts_with("spec.containers[0].name: Invalid value: \"Web\": a lowercase RFC 1123 label")));
    // A name too long and badly made: a cause for each problem, as kube gives them.
    let long = format!("Sa{}", "x".repeat(260));
    let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "x"}],
        "serviceAccountName": long, "runtimeClassName": long}});
    let got = messages("v1", "Pod", pod);
    for field in ["spec.serviceAccountName", "spec.runtimeClassName"] {
        let said: Vec<&String> = got.iter().filter(|g| g.starts_with(&format!("{field}: "))).collect();
        assert_eq!(said.len(), 2, "{field}: {got:?}");
        assert!(said[0].ends_with("must be no more than 253 characters"), "{said:?}");
        assert!(said[1].contains("a lowercase RFC 1123 subdomain"), "{said:?}");
    }
    let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}}});
    assert_eq!(messages("apps/v1", "Deployment", deploy), ["spec.template.spec.containers: Required value"]);
}

#[test]
fn a_workload_selects_its_template() {
    let deploy = |selector: Value| {
        json!({"spec": {"replicas": -1, "selector": selector, "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
    };
    let got = messages("apps/v1", "Deployment", deploy(json!({"matchLabels": {"app": "db"}})));
    assert_eq!(
        got,
        [
            "spec.replicas: Invalid value: -1: must be greater than or equal to 0",
            "spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`"
        ]
    );
    let got = messages("apps/v1", "Deployment", deploy(json!({})));
    assert_eq!(got[1], "spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: empty selector is invalid for deployment");
    let rs = json!({"spec": {"selector": {"matchLabels": {}}, "template": {}}});
    assert!(messages("apps/v1", "ReplicaSet", rs)[0].ends_with("empty selector is invalid for deployment"));
    let got = messages("apps/v1", "Deployment", deploy(json!({"matchLabels": {"app": "web"}})));
    assert_eq!(got.len(), 1, "only replicas: {got:?}");
}

#[test]
fn what_an_update_may_not_change() {
    let deploy = |app: &str| json!({"spec": {"selector": {"matchLabels": {"app": app}}}});
    let got: Vec<String> = update_errors("Deployment", &deploy("web"), &deploy("api"))
        .into_iter()
        .map(|c| format!("{}: {}", c.field, c.message))
        .collect();
    assert_eq!(got, ["spec.selector: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"app\":\"api\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable"]);
    assert!(update_errors("Deployment", &deploy("web"), &deploy("web")).is_empty());
    let cm = |v: &str, immutable: bool| json!({"immutable": immutable, "data": {"k": v}});
    assert!(update_errors("ConfigMap", &cm("a", false), &cm("b", true)).is_empty(), "not immutable yet");
    let got: Vec<String> =
        update_errors("ConfigMap", &cm("a", true), &cm("b", false)).into_iter().map(|c| c.field).collect();
    assert_eq!(got, ["immutable", "data"]);
    let secret = |t: &str| json!({"type": t});
    assert_eq!(update_errors("Secret", &secret("Opaque"), &secret("kubernetes.io/tls"))[0].field, "type");
}

fn update_messages(kind: &str, old: &Value, new: &Value) -> Vec<String> {
    update_errors(kind, old, new).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
}

#[test]
fn kept_fields_in_kubes_words() {
    let rb =
        |role: &str| json!({"roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}});
    assert_eq!(
        update_messages("RoleBinding", &rb("view"), &rb("admin")),
        ["roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"admin\"}: cannot change roleRef"]
    );
    let sc = |p: &str, mode: &str| json!({"provisioner": p, "volumeBindingMode": mode, "parameters": {"type": "gp3"}});
    assert_eq!(
        update_messages("StorageClass", &sc("a", "Immediate"), &sc("b", "WaitForFirstConsumer")),
        [
            "provisioner: Forbidden: updates to provisioner are forbidden.",
            "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable"
        ]
    );
    let csi = |attach: bool| json!({"spec": {"attachRequired": attach, "podInfoOnMount": attach}});
    assert_eq!(
        update_messages("CSIDriver", &csi(true), &csi(false)),
        ["spec.attachedRequired: Invalid value: false: field is immutable"],
        "kube's misspelt path; podInfoOnMount may change"
    );
    let pc = |v: i64| json!({"value": v});
    assert_eq!(
        update_messages("PriorityClass", &pc(1), &pc(2)),
        ["value: Forbidden: may not be changed in an update."]
    );
    assert!(update_messages("PriorityClass", &pc(1), &pc(1)).is_empty());
}

#[test]
fn a_statefulset_and_a_job_keep_their_specs() {
    let sts = |replicas: i64, size: &str| {
        json!({"spec": {"replicas": replicas, "serviceName": "db", "template": {"metadata": {"labels": {"a": "b"}}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": size}}}}]}})
    };
    assert!(update_messages("StatefulSet", &sts(1, "1Gi"), &sts(3, "1Gi")).is_empty(), "replicas may change");
    assert_eq!(
        update_messages("StatefulSet", &sts(1, "1Gi"), &sts(1, "2Gi")),
        ["spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'revisionHistoryLimit', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"]
    );
    let job = |suspend: bool, selector: &str, image: &str| {
        json!({"spec": {"suspend": suspend, "completions": 3, "selector": {"matchLabels": {"j": "x"}},
            "template": {"metadata": {"labels": {"j": "x"}},
                "spec": {"nodeSelector": {"zone": selector}, "containers": [{"name": "c", "image": image}]}}}})
    };
    let got = update_messages("Job", &job(false, "a", "x"), &job(false, "b", "x"));
    assert_eq!(got.len(), 1, "{got:?}");
    assert!(
        got[0].starts_with("spec.template: Invalid value: {") && got[0].ends_with("}: field is immutable"),
        "{got:?}"
    );
    assert!(
        update_messages("Job", &job(true, "a", "x"), &job(true, "b", "x")).is_empty(),
        "a suspended job not yet started may move its pods"
    );
    assert_eq!(update_messages("Job", &job(true, "a", "x"), &job(true, "a", "y")).len(), 1, "but not change them");
    let mut started = job(true, "a", "x");
    started["status"] = json!({"startTime": "2026-01-01T00:00:00Z"});
    assert_eq!(update_messages("Job", &started, &job(true, "b", "x")).len(), 1, "once started, not even that");
    let mut more = job(false, "a", "x");
    more["spec"]["completions"] = json!(4);
    assert_eq!(
        update_messages("Job", &job(false, "a", "x"), &more),
        ["spec.completions: Invalid value: 4: field is immutable"]
    );
}

#[test]
fn a_claim_and_a_volume_keep_theirs() {
    let pvc = |class: Option<&str>, size: &str, phase: &str| {
        let mut spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}});
        if let Some(c) = class {
            spec["storageClassName"] = json!(c);
        }
        json!({"spec": spec, "status": {"phase": phase, "capacity": {"storage": "2Gi"}}})
    };
    assert!(
        update_messages("PersistentVolumeClaim", &pvc(None, "1Gi", "Pending"), &pvc(Some("fast"), "1Gi", "Pending"))
            .is_empty(),
        "a class may be set once"
    );
    let got =
        update_messages("PersistentVolumeClaim", &pvc(Some("a"), "1Gi", "Pending"), &pvc(Some("b"), "1Gi", "Pending"));
    assert_eq!(
        got,
        ["spec: Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n- storageClassName: \"a\"\n+ storageClassName: \"b\""]
    );
    assert_eq!(
        update_messages("PersistentVolumeClaim", &pvc(None, "1Gi", "Pending"), &pvc(None, "5Gi", "Pending")).len(),
        1,
        "an unbound claim keeps its size"
    );
    assert!(
        update_messages("PersistentVolumeClaim", &pvc(None, "2Gi", "Bound"), &pvc(None, "5Gi", "Bound")).is_empty(),
        "a bound one grows"
    );
    assert_eq!(
        update_messages("PersistentVolumeClaim", &pvc(None, "5Gi", "Bound"), &pvc(None, "1Gi", "Bound")),
        ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"]
    );
    let pv = |path: &str, policy: &str| json!({"spec": {"hostPath": {"path": path}, "persistentVolumeReclaimPolicy": policy}});
    assert!(update_messages("PersistentVolume", &pv("/a", "Retain"), &pv("/a", "Delete")).is_empty());
    let got = update_messages("PersistentVolume", &pv("/a", "Retain"), &pv("/b", "Retain"));
    assert_eq!(got, ["spec.persistentvolumesource: Forbidden: spec.persistentvolumesource is immutable after creation\n- hostPath.path: \"/a\"\n+ hostPath.path: \"/b\""]);
}

#[test]
fn a_pod_changes_only_what_kube_lets_it() {
    let pod = |image: &str, env: &str| {
        json!({"spec": {"containers": [{"name": "c", "image": image, "env": [{"name": "A", "value": env}]}],
            "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}], "activeDeadlineSeconds": 100}})
    };
    assert!(update_messages("Pod", &pod("a", "1"), &pod("b", "1")).is_empty(), "images may change");
    let got = update_messages("Pod", &pod("a", "1"), &pod("a", "2"));
    assert_eq!(got.len(), 1);
    assert!(
        got[0].starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"),
        "{got:?}"
    );
    assert!(got[0].ends_with("\n- containers[0].env[0].value: \"1\"\n+ containers[0].env[0].value: \"2\""), "{got:?}");
    let mut more = pod("a", "1");
    more["spec"]["tolerations"].as_array_mut().unwrap().push(json!({"key": "other", "operator": "Exists"}));
    more["spec"]["tolerations"][0]["tolerationSeconds"] = json!(60);
    more["spec"]["activeDeadlineSeconds"] = json!(50);
    assert!(
        update_messages("Pod", &pod("a", "1"), &more).is_empty(),
        "added tolerations, new seconds, a shorter deadline"
    );
    more["spec"]["activeDeadlineSeconds"] = json!(200);
    assert_eq!(
        update_messages("Pod", &pod("a", "1"), &more),
        ["spec.activeDeadlineSeconds: Invalid value: 200: must be less than or equal to previous value"]
    );
    let mut fewer = pod("a", "1");
    fewer["spec"]["tolerations"] = json!([]);
    assert_eq!(
        update_messages("Pod", &pod("a", "1"), &fewer),
        ["spec.tolerations: Forbidden: existing toleration can not be modified except its tolerationSeconds"]
    );
    let mut two = pod("a", "1");
    two["spec"]["containers"].as_array_mut().unwrap().push(json!({"name": "d", "image": "x"}));
    assert_eq!(
        update_messages("Pod", &pod("a", "1"), &two),
        ["spec.containers: Forbidden: pod updates may not add or remove containers"]
    );
}

#[test]
fn probes_and_resources() {
    let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
        "livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}},
        "readinessProbe": {"periodSeconds": 5},
        "lifecycle": {"preStop": {"sleep": {"seconds": 1}}},
        "resources": {"requests": {"cpu": "2", "memory": "-1Mi", "example.com/gpu": "1", "ephemeral-storage": "700m"},
            "limits": {"cpu": "1", "memory": "1Gi", "ephemeral-storage": "0.7"}}}]}});
    let got = messages("v1", "Pod", pod);
    holds_all(
        &got,
        &[
            "spec.containers[0].livenessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            "spec.containers[0].readinessProbe: Required value: must specify a handler type",
            "spec.containers[0].resources.requests[memory]: Invalid value: \"-1Mi\": must be greater than or equal to 0",
            "spec.containers[0].resources.requests: Invalid value: \"2\": must be less than or equal to cpu limit of 1",
            "spec.containers[0].resources.limits: Required value: Limit must be set for non overcommitable resources",
        ],
    );
    assert_eq!(got.len(), 5, "a sleep is a hook's handler: {got:?}");
}

#[test]
fn volumes_mounts_and_restart_policies() {
    let spec = json!({"containers": [{"name": "c", "image": "x",
            "volumeMounts": [{"name": "data", "mountPath": "/d"}, {"name": "cfg", "mountPath": "/d"}]}],
        "volumes": [{"name": "cfg", "configMap": {"name": "c"}, "emptyDir": {}}, {"name": "cfg", "secret": {}}, {"name": "none"}]});
    let got = messages("v1", "Pod", json!({"spec": spec.clone()}));
    holds_all(
        &got,
        &[
            "spec.volumes[0].configMap: Forbidden: may not specify more than 1 volume type",
            "spec.volumes[1].name: Duplicate value: \"cfg\"",
            "spec.volumes[2]: Required value: must specify a volume type",
            "spec.containers[0].volumeMounts[0].name: Not found: \"data\"",
            "spec.containers[0].volumeMounts[1].mountPath: Invalid value: \"/d\": must be unique",
            "spec.volumes[1].secret.secretName: Required value",
        ],
    );
    assert_eq!(got.len(), 6, "{got:?}");
    // A StatefulSet's pods mount its claim templates: kube checks its template's labels only.
    let mut template = json!({"metadata": {"labels": {"app": "db"}}, "spec": spec});
    let sts = json!({"spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template.clone()}});
    assert!(messages("apps/v1", "StatefulSet", sts).is_empty());
    template["spec"] = json!({"containers": [{"name": "c", "image": "x"}], "restartPolicy": "Never"});
    let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "db"}}, "template": template.clone()}});
    assert_eq!(
        messages("apps/v1", "Deployment", deploy),
        ["spec.template.spec.restartPolicy: Unsupported value: \"Never\": supported values: \"Always\""]
    );
    template["spec"]["restartPolicy"] = json!("Always");
    let job = json!({"spec": {"template": template}});
    assert_eq!(
        messages("batch/v1", "Job", job.clone()),
        ["spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""]
    );
    let cron = json!({"spec": {"schedule": "* * * * *", "jobTemplate": job}});
    assert_eq!(messages("batch/v1", "CronJob", cron).len(), 1, "a CronJob's jobs alike");
}

#[test]
fn env_ports_and_node_selectors() {
    let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
        "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}, {"containerPort": 82, "name": "Metrics-Port-Long"}],
        "env": [{"name": "A=B", "value": "1"}, {"name": "B", "value": "1", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}, {"name": "C", "valueFrom": {}}]}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In"}, {"key": "gpu", "operator": "Exists", "values": ["x"]}, {"key": "k", "operator": "Near"}]}]}}}}});
    let got = messages("v1", "Pod", pod);
    holds_all(
        &got,
        &[
            "spec.containers[0].ports[1].name: Duplicate value: \"http\"",
            "spec.containers[0].ports[2].name: Invalid value: \"Metrics-Port-Long\": must be no more than 15 characters",
            "spec.containers[0].ports[2].name: Invalid value: \"Metrics-Port-Long\": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            "spec.containers[0].env[0].name: Invalid value: \"A=B\": a valid environment variable name must consist only of printable ASCII characters other than '='",
            "spec.containers[0].env[1].valueFrom: Invalid value: \"\": may not be specified when `value` is not empty",
            "spec.containers[0].env[2].valueFrom: Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[2].operator: Invalid value: \"Near\": not a valid selector operator",
        ],
    );
    assert_eq!(got.len(), 9, "{got:?}");
    let svc = json!({"spec": {"type": "ClusterIP", "ports": [{"name": "web", "port": 80, "targetPort": "http"},
        {"name": "web", "port": 81, "targetPort": 70000}]}});
    assert_eq!(
        messages("v1", "Service", svc),
        [
            "spec.ports[1].name: Duplicate value: \"web\"",
            "spec.ports[1].targetPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
        ]
    );
}

#[test]
fn affinity_ids_resource_names_and_volume_sources() {
    let pod = json!({"spec": {
        "securityContext": {"runAsUser": -1, "supplementalGroups": [5, -2]},
        "affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"a": "b"}}}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "podAffinityTerm": {"topologyKey": "zone"}}]}},
        "containers": [{"name": "c", "image": "x", "securityContext": {"runAsGroup": 4294967296u64},
            "resources": {"limits": {"gpu": "1", "example.com/gpu": "1", "cpu": "1"}, "requests": {"example.com/gpu": "1"}},
            "volumeMounts": [{"name": "cm", "mountPath": "/a"}, {"name": "claim", "mountPath": "/b"}]}],
        "volumes": [{"name": "cm", "configMap": {"defaultMode": 1000, "items": [{"key": "k", "path": "../x"}, {"key": "", "path": "/abs"}]}},
            {"name": "claim", "persistentVolumeClaim": {"claimName": ""}}]}});
    let got = messages("v1", "Pod", pod);
    holds_all(
        &got,
        &[
            "spec.securityContext.runAsUser: Invalid value: -1: must be between 0 and 2147483647, inclusive",
            "spec.securityContext.supplementalGroups[1]: Invalid value: -2: must be between 0 and 2147483647, inclusive",
            "spec.containers[0].securityContext.runAsGroup: Invalid value: 4294967296: must be between 0 and 2147483647, inclusive",
            "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: can not be empty",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be in the range 1-100",
            "spec.containers[0].resources.limits[gpu]: Invalid value: gpu: must be a standard resource type or fully qualified",
            "spec.containers[0].resources.limits[gpu]: Invalid value: gpu: must be a standard resource for containers",
            "spec.volumes[0].configMap.name: Required value",
            "spec.volumes[0].configMap.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
            "spec.volumes[0].configMap.items[0].path: Invalid value: \"../x\": must not contain '..'",
            "spec.volumes[0].configMap.items[1].key: Required value",
            "spec.volumes[0].configMap.items[1].path: Invalid value: \"/abs\": must be a relative path",
            "spec.volumes[1].persistentVolumeClaim.claimName: Required value",
        ],
    );
    // kube checks an empty topology key as a label key too: two more messages.
    assert_eq!(got.len(), 15, "{got:?}");
    let pod = json!({"spec": {"containers": [{"name": "c", "image": "x",
            "securityContext": {"privileged": true, "allowPrivilegeEscalation": false}}],
        "topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Maybe"}]}});
    let got = messages("v1", "Pod", pod);
    holds_all(
        &got,
        &[
            "spec.containers[0].securityContext: Invalid value: {\"allowPrivilegeEscalation\":false,\"privileged\":true}: cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            "spec.topologySpreadConstraints[0].maxSkew: Invalid value: 0: must be greater than zero",
            "spec.topologySpreadConstraints[0].topologyKey: Required value: can not be empty",
            "spec.topologySpreadConstraints[0].whenUnsatisfiable: Unsupported value: \"Maybe\": supported values: \"DoNotSchedule\", \"ScheduleAnyway\"",
        ],
    );
    assert_eq!(got.len(), 4, "{got:?}");
}

#[test]
fn ingress_paths_and_backends() {
    let ing = json!({"spec": {"rules": [{"http": {"paths": [
        {"path": "/api", "backend": {"service": {"name": "web", "port": {"number": 80}}}},
        {"path": "api//v1", "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {}}}},
        {"path": "/", "pathType": "Exact", "backend": {}}]}}]}});
    assert_eq!(
        messages("networking.k8s.io/v1", "Ingress", ing),
        [
            "spec.rules[0].http.paths[0].pathType: Required value: pathType must be specified",
            "spec.rules[0].http.paths[1].path: Invalid value: \"api//v1\": must be an absolute path",
            "spec.rules[0].http.paths[1].path: Invalid value: \"api//v1\": must not contain '//'",
            "spec.rules[0].http.paths[1].backend.service.port.name: Required value: port name or number is required",
            "spec.rules[0].http.paths[2].backend: Invalid value: \"\": resource or service backend is required",
        ]
    );
}

#[test]
fn role_rules() {
    let role =
        json!({"rules": [{"resources": ["pods"], "verbs": ["get"]}, {"nonResourceURLs": ["/healthz"], "verbs": []}]});
    assert_eq!(
        messages("rbac.authorization.k8s.io/v1", "Role", role.clone()),
        [
            "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
            "rules[1].verbs: Required value: verbs must contain at least one value",
            "rules[1].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs"
        ]
    );
    assert_eq!(messages("rbac.authorization.k8s.io/v1", "ClusterRole", role).len(), 2, "a ClusterRole may name URLs");
    let aggregated = json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}});
    assert!(messages("rbac.authorization.k8s.io/v1", "ClusterRole", aggregated).is_empty());
}

#[test]
fn services_and_config_keys() {
    let svc = json!({"spec": {"type": "Internal", "ports": [{"port": 80}, {"port": 0, "protocol": "ICMP"}]}});
    let got = messages("v1", "Service", svc);
    holds_all(
        &got,
        &[
            "spec.type: Unsupported value: \"Internal\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\"",
            "spec.ports[0].name: Required value",
            "spec.ports[1].port: Invalid value: 0: must be between 1 and 65535, inclusive",
            "spec.ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
        ],
    );
    let headless = json!({"spec": {"clusterIP": "None", "type": "ClusterIP", "trafficDistribution": "PreferClose"}});
    assert!(messages("v1", "Service", headless).is_empty());
    // 1.33 refuses what its PreferSameTrafficDistribution gate, off, would allow.
    let same_zone = json!({"spec": {"clusterIP": "None", "trafficDistribution": "PreferSameZone"}});
    assert_eq!(
        messages("v1", "Service", same_zone),
        ["spec.trafficDistribution: Unsupported value: \"PreferSameZone\": supported values: \"PreferClose\""]
    );
    let cm = json!({"data": {"ok.key_1-x": "", "bad key": "", "..x": ""}});
    let got = messages("v1", "ConfigMap", cm);
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got.iter().any(|g| g.starts_with("data[bad key]: Invalid value: \"bad key\": a valid config key")),
        "{got:?}"
    );
    assert!(got.contains(&"data[..x]: Invalid value: \"..x\": must not start with '..'".to_string()), "{got:?}");
    // A port of 0 is unset to Go: a host port may be left so; a container port is then required.
    let pod = json!({"spec": {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 0, "hostPort": 0}]}],
        "initContainers": [{"name": "c", "image": "x"}]}});
    assert_eq!(
        messages("v1", "Pod", pod),
        [
            "spec.initContainers[0].name: Duplicate value: \"c\"",
            "spec.containers[0].ports[0].containerPort: Required value"
        ]
    );
}

fn messages_after(api_version: &str, kind: &str, obj: Value, old: &Value) -> Vec<String> {
    errors(api_version, kind, &obj, Some(old)).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
}

#[test]
fn label_selectors_wherever_they_are() {
    let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "web", "bad key!": "x"},
            "matchExpressions": [{"key": "tier", "operator": "in", "values": ["a"]},
                {"key": "zone", "operator": "In", "values": ["not ok!"]},
                {"key": "role", "operator": "Exists", "values": ["x"]}]},
        "template": {"metadata": {"labels": {"app": "web", "tier": "a", "zone": "z", "role": "r"}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}}});
    let got = messages("apps/v1", "Deployment", deploy);
    holds_all(
        &got,
        &[
            "spec.selector.matchLabels: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            "spec.selector.matchExpressions[0].operator: Invalid value: \"in\": not a valid selector operator",
            "spec.selector.matchExpressions[1].values[0]: Invalid value: \"not ok!\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            "spec.selector.matchExpressions[2].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        ],
    );
    let pdb = json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}});
    assert_eq!(
        messages("policy/v1", "PodDisruptionBudget", pdb),
        ["spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"]
    );
}

#[test]
fn scheduling_terms_gates_and_profiles() {
    let spec = json!({"containers": [{"name": "c", "image": "x",
            "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "../p.json"},
                "appArmorProfile": {"type": "RuntimeDefault", "localhostProfile": "p"}}}],
        "securityContext": {"seccompProfile": {"type": "runtime/default"}},
        "nodeSelector": {"disk": "fast ssd"},
        "schedulingGates": [{"name": "example.com/wait"}, {"name": "example.com/wait"}],
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["a", "b"]}],
                 "matchExpressions": [{"key": "/zone", "operator": "In", "values": ["a"]}]}]}},
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "zone", "namespaces": ["Bad_NS"], "matchLabelKeys": ["app"],
                 "mismatchLabelKeys": ["app"], "labelSelector": {"matchLabels": {"x": "y"}}},
                {"topologyKey": "zone", "matchLabelKeys": ["app"]}]}},
        "topologySpreadConstraints": [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2,
             "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["app"]},
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]});
    let got = messages("v1", "Pod", json!({"spec": spec}));
    let affinity = "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution";
    let terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]";
    holds_all(
        &got,
        &[
            "spec.securityContext.seccompProfile.type: Unsupported value: \"runtime/default\": supported values: \"Localhost\", \"RuntimeDefault\", \"Unconfined\"",
            "spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: \"../p.json\": must not contain '..'",
            "spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value: \"p\": can only be set when AppArmor type is Localhost",
            "spec.schedulingGates[1]: Duplicate value: \"example.com/wait\"",
            &format!("{terms}.matchFields[0].values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node field selector"),
            &format!("{terms}.matchFields[0].key: Invalid value: \"metadata.uid\": not a valid field selector key"),
            &format!("{terms}.matchExpressions[0].key: Invalid value: \"/zone\": prefix part must be non-empty"),
            &format!("{affinity}[0].namespace: Invalid value: \"Bad_NS\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
            &format!("{affinity}[0].matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and mismatchLabelKeys"),
            &format!("{affinity}[1].matchLabelKeys: Forbidden: must not be specified when labelSelector is not set"),
            "spec.topologySpreadConstraints[0].minDomains: Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not ScheduleAnyway",
            "spec.topologySpreadConstraints[0].matchLabelKeys[0]: Invalid value: \"app\": exists in both matchLabelKeys and labelSelector",
            "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}: Duplicate value: \"{zone, ScheduleAnyway}\"",
        ],
    );
    assert!(
        got.iter().any(|m| m.starts_with("spec.nodeSelector: Invalid value: \"fast ssd\": a valid label")),
        "{got:?}"
    );
    // A preferred term's values are not label values, in kube too.
    let preferred = json!({"spec": {"containers": [{"name": "c", "image": "x"}], "affinity": {"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": {
            "matchExpressions": [{"key": "zone", "operator": "In", "values": ["not a label!"]}]}}]}}}});
    assert!(messages("v1", "Pod", preferred).is_empty());
}

#[test]
fn rollouts_budgets_and_autoscalers() {
    let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let deploy = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": "0%"}}}});
    assert_eq!(
        messages("apps/v1", "Deployment", deploy),
        ["spec.strategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:0, IntVal:0, StrVal:\"\"}: may not be 0 when `maxSurge` is 0"]
    );
    let recreate = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template,
        "strategy": {"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}}});
    assert_eq!(
        messages("apps/v1", "Deployment", recreate),
        ["spec.strategy.rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'"]
    );
    let ds = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template,
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "150%", "maxSurge": 1}}}});
    holds_all(
        &messages("apps/v1", "DaemonSet", ds),
        &[
            "spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"150%\"}: must not be greater than 100%",
            "spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: intstr.IntOrString{Type:0, IntVal:1, StrVal:\"\"}: may not be set when maxUnavailable is non-zero",
        ],
    );
    let pdb = json!({"spec": {"minAvailable": "half", "maxUnavailable": -1, "unhealthyPodEvictionPolicy": "Never"}});
    let got = messages("policy/v1", "PodDisruptionBudget", pdb);
    holds_all(
        &got,
        &[
            "spec.minAvailable: Invalid value: intstr.IntOrString{Type:1, IntVal:0, StrVal:\"half\"}: a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
            "spec.maxUnavailable: Invalid value: -1: must be greater than or equal to 0",
            "spec.unhealthyPodEvictionPolicy: Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\"",
        ],
    );
    assert!(
        got[0].starts_with("spec: Invalid value: {")
            && got[0].ends_with(": minAvailable and maxUnavailable cannot be both set")
    );
    let hpa = json!({"spec": {"minReplicas": 3, "maxReplicas": 2, "scaleTargetRef": {"kind": "Deployment", "name": "a/b"},
        "metrics": [{"type": "Pods", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
            {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Ratio", "averageUtilization": 0}}}],
        "behavior": {"scaleUp": {"stabilizationWindowSeconds": 3601, "selectPolicy": "Max",
            "policies": [{"type": "hm", "value": 0, "periodSeconds": 1801}]}, "scaleDown": {"policies": []}}}});
    holds_all(
        &messages("autoscaling/v2", "HorizontalPodAutoscaler", hpa),
        &[
            "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
            "spec.scaleTargetRef.name: Invalid value: \"a/b\": may not contain '/'",
            "spec.metrics[0].pods: Required value: must populate information for the given metric source",
            "spec.metrics[0].resource: Forbidden: must populate the given metric source only",
            "spec.metrics[1].resource.target.type: Invalid value: \"Ratio\": must be either Utilization, Value, or AverageValue",
            "spec.metrics[1].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
            "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: 3601: must be less than or equal to 3600",
            "spec.behavior.scaleUp.policies[0].type: Unsupported value: \"hm\": supported values: \"Percent\", \"Pods\"",
            "spec.behavior.scaleUp.policies[0].value: Invalid value: 0: must be greater than zero",
            "spec.behavior.scaleUp.policies[0].periodSeconds: Invalid value: 1801: must be less than or equal to 1800",
            "spec.behavior.scaleDown.policies: Required value: must specify at least one Policy",
        ],
    );
}

#[test]
fn network_policies() {
    let policy = json!({"spec": {"podSelector": {}, "policyTypes": ["Ingress", "Sideways"],
        "ingress": [{"ports": [{"protocol": "ICMP", "port": 80}, {"port": 443, "endPort": 80},
                {"port": "https", "endPort": 8443}, {"endPort": 9000}],
            "from": [{}, {"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}},
                {"ipBlock": {"cidr": "010.0.0.1/8", "except": ["10.1.0.0/16", "11.0.0.0/16", "10.0.0.0/8", "bad"]}},
                {"ipBlock": {"cidr": "10.0.0.0"}}]}]}});
    let got = messages("networking.k8s.io/v1", "NetworkPolicy", policy);
    let port = "spec.ingress[0].ports";
    let from = "spec.ingress[0].from";
    let want = [
        format!("{port}[0].protocol: Unsupported value: \"ICMP\": supported values: \"TCP\", \"UDP\", \"SCTP\""),
        format!("{port}[1].endPort: Invalid value: 443: must be greater than or equal to `port`"),
        format!("{port}[2].endPort: Invalid value: 8443: may not be specified when `port` is non-numeric"),
        format!("{port}[3].endPort: Invalid value: 9000: may not be specified when `port` is not specified"),
        format!("{from}[0]: Required value: must specify a peer"),
        format!("{from}[1]: Forbidden: may not specify both ipBlock and another peer"),
        format!("{from}[2].ipBlock.except[1]: Invalid value: \"11.0.0.0/16\": must be a strict subset of `cidr`"),
        format!("{from}[2].ipBlock.except[2]: Invalid value: \"10.0.0.0/8\": must be a strict subset of `cidr`"),
        format!("{from}[2].ipBlock.except[3]: Invalid value: \"bad\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
        format!("{from}[3].ipBlock.cidr: Invalid value: \"10.0.0.0\": must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
        "spec.policyTypes[1]: Unsupported value: \"Sideways\": supported values: \"Ingress\", \"Egress\"".to_string(),
    ];
    holds_all(&got, &want.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(got.len(), want.len(), "{got:?}");
}

#[test]
fn webhook_configurations() {
    let hook = |name: &str, config: Value| {
        json!({"name": name, "clientConfig": config, "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]})
    };
    let config = json!({"webhooks": [
        hook("pods.example.com", json!({"service": {"name": "hooks", "namespace": "system", "path": "/validate"}})),
        hook("pods.example.com", json!({"url": "http://user@hooks.example.com/x?y=1"})),
        hook("short.name", json!({"service": {"namespace": "system", "path": "/Validate_Pods", "port": 0}})),
        {"name": "rules.example.com", "clientConfig": {"url": "https://h"}, "sideEffects": "Some",
            "admissionReviewVersions": ["v2", "v2"], "timeoutSeconds": 31,
            "rules": [{"operations": ["*", "create"], "apiGroups": [], "apiVersions": [""],
                "resources": ["*", "pods", "pods/*", "pods/log"], "scope": "Everywhere"}]},
        {"name": "none.example.com", "clientConfig": {}, "sideEffects": "None"}]});
    let got = messages("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", config.clone());
    let form = "; desired format: https://host[/path]";
    holds_all(
        &got,
        &[
            "webhooks[1].name: Duplicate value: \"pods.example.com\"",
            &format!("webhooks[1].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme{form}"),
            "webhooks[1].clientConfig.url: Invalid value: \"user\": user information is not permitted in the URL",
            "webhooks[1].clientConfig.url: Invalid value: \"y=1\": query parameters are not permitted in the URL",
            "webhooks[2].name: Invalid value: \"short.name\": should be a domain with at least three segments separated by dots",
            "webhooks[2].clientConfig.service.namespace: Required value: service namespace is required",
            "webhooks[2].clientConfig.service.port: Invalid value: 0: port is not valid: must be between 1 and 65535, inclusive",
            "webhooks[3].rules[0].operations: Invalid value: []admissionregistration.OperationType{\"*\", \"create\"}: if '*' is present, must not specify other operations",
            "webhooks[3].rules[0].operations[1]: Unsupported value: \"create\": supported values: \"*\", \"CONNECT\", \"CREATE\", \"DELETE\", \"UPDATE\"",
            "webhooks[3].rules[0].apiGroups: Required value",
            "webhooks[3].rules[0].apiVersions[0]: Required value",
            "webhooks[3].rules[0].resources[3]: Invalid value: \"pods/log\": if 'pods/*' is present, must not specify pods/log",
            "webhooks[3].rules[0].resources: Invalid value: []string{\"*\", \"pods\", \"pods/*\", \"pods/log\"}: if '*' is present, must not specify other resources without subresources",
            "webhooks[3].rules[0].scope: Unsupported value: \"Everywhere\": supported values: \"*\", \"Cluster\", \"Namespaced\"",
            "webhooks[3].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
            "webhooks[3].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
            "webhooks[3].admissionReviewVersions[1]: Invalid value: \"v2\": duplicate version",
            "webhooks[3].admissionReviewVersions: Invalid value: []string{\"v2\", \"v2\"}: must include at least one of v1, v1beta1",
            "webhooks[4].clientConfig: Required value: exactly one of url or service is required",
            "webhooks[4].admissionReviewVersions: Required value: must specify one of v1, v1beta1",
        ],
    );
    assert!(got.iter().any(|m| m.starts_with("webhooks[2].clientConfig.service.path: Invalid value: \"/Validate_Pods\": segment[0]: a lowercase RFC 1123 subdomain")), "{got:?}");
    assert!(!got.iter().any(|m| m.starts_with("webhooks[0]")), "{got:?}");
    // An object stored with side effects kube has since refused keeps them through updates.
    let got =
        messages_after("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", config.clone(), &config);
    assert!(!got.iter().any(|m| m.contains("sideEffects")), "{got:?}");
}

#[test]
fn cronjob_schedules_and_time_zones() {
    let cronjob = |schedule: &str, zone: Value| {
        json!({"metadata": {"name": "nightly"}, "spec": {"schedule": schedule, "timeZone": zone,
            "concurrencyPolicy": "Sometimes", "startingDeadlineSeconds": -1,
            "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}}}})
    };
    let got = messages("batch/v1", "CronJob", cronjob("61 * * * *", json!("Mars/Olympus")));
    holds_all(
        &got,
        &[
            "spec.schedule: Invalid value: \"61 * * * *\": end of range (61) above maximum (59): 61",
            "spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus",
            "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            "spec.startingDeadlineSeconds: Invalid value: -1: must be greater than or equal to 0",
        ],
    );
    let got = messages("batch/v1", "CronJob", cronjob("TZ=UTC 0 * * * *", json!("Local")));
    holds_all(
        &got,
        &[
            "spec.schedule: Invalid value: \"TZ=UTC 0 * * * *\": cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ],
    );
    // An old schedule with a zone in it keeps it, and an unchanged zone is not looked up again.
    let old = cronjob("TZ=UTC 0 * * * *", Value::Null);
    let got = messages_after("batch/v1", "CronJob", cronjob("TZ=UTC 5 * * * *", Value::Null), &old);
    assert!(!got.iter().any(|m| m.starts_with("spec.schedule")), "{got:?}");
    let mut long = cronjob("@daily", json!("Europe/Paris"));
    long["metadata"]["name"] = json!("n".repeat(53));
    let got = messages("batch/v1", "CronJob", long.clone());
    assert!(
        got.iter().any(
            |m| m.starts_with("metadata.name: Invalid value:") && m.ends_with("must be no more than 52 characters")
        ),
        "{got:?}"
    );
    assert!(!messages_after("batch/v1", "CronJob", long.clone(), &long).iter().any(|m| m.starts_with("metadata.name")));
}

#[test]
fn a_gated_pod_only_narrows_its_node_affinity() {
    let pod = |terms: Value| {
        json!({"spec": {"schedulingGates": [{"name": "wait"}], "containers": [{"name": "c", "image": "x"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}})
    };
    let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
    let disk = json!({"key": "disk", "operator": "In", "values": ["ssd"]});
    let old = pod(json!([{"matchExpressions": [zone]}]));
    assert!(update_errors("Pod", &old, &pod(json!([{"matchExpressions": [zone, disk]}]))).is_empty());
    let terms = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let got = update_messages("Pod", &old, &pod(json!([{"matchExpressions": [disk]}])));
    assert!(
        got.iter().any(|m| m.starts_with(&format!("{terms}[0]: Invalid value:"))
            && m.ends_with("only additions are allowed (no mutations or deletions)")),
        "{got:?}"
    );
    let got = update_messages("Pod", &old, &pod(json!([{"matchExpressions": [zone]}, {"matchExpressions": [disk]}])));
    assert!(
        got.iter().any(|m| m.starts_with(&format!("{terms}: Invalid value:"))
            && m.ends_with("no additions/deletions to non-empty NodeSelectorTerms list are allowed")),
        "{got:?}"
    );
}

#[test]
fn quotas_and_limit_ranges() {
    let quota = json!({"spec": {"hard": {"pods": "1.5", "cpu": "-1", "foo": "1", "count/deployments.apps": "2"},
        "scopes": ["BestEffort", "NotBestEffort"]}});
    let got = messages("v1", "ResourceQuota", quota);
    holds_all(
        &got,
        &[
            "spec.hard[pods]: Invalid value: \"1.5\": must be an integer",
            "spec.hard[cpu]: Invalid value: \"-1\": must be greater than or equal to 0",
            "spec.hard[foo]: Invalid value: foo: must be a standard resource type or fully qualified",
            "spec.hard[foo]: Invalid value: foo: must be a standard resource for quota",
            "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: unsupported scope applied to resource",
            "spec.scopes: Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: conflicting scopes",
        ],
    );
    assert!(!got.iter().any(|m| m.contains("count/deployments.apps")), "{got:?}");
    let selector = json!({"spec": {"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [
        {"scopeName": "Terminating", "operator": "In", "values": []}]}}});
    holds_all(
        &messages("v1", "ResourceQuota", selector),
        &["spec.scopeSelector.matchExpressions.values: Required value: must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"],
    );
    let limits = json!({"spec": {"limits": [
        {"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}, "default": {"cpu": "1"}, "defaultRequest": {"cpu": "1"}},
        {"type": "Pod", "default": {"cpu": "1"}},
        {"type": "PersistentVolumeClaim", "max": {"memory": "1Gi"}},
        {"type": "Container", "maxLimitRequestRatio": {"cpu": "0.5"}}]}});
    let got = messages("v1", "LimitRange", limits);
    holds_all(
        &got,
        &[
            "spec.limits[0].min[cpu]: Invalid value: \"2\": min value 2 is greater than max value 1",
            "spec.limits[0].defaultRequest[cpu]: Invalid value: \"1\": min value 2 is greater than default request value 1",
            "spec.limits[0].default[cpu]: Invalid value: \"2\": min value 2 is greater than default value 1",
            "spec.limits[1].default: Forbidden: may not be specified when `type` is 'Pod'",
            "spec.limits[2].limits: Required value: either minimum or maximum storage value is required, but neither was provided",
            "spec.limits[3].type: Duplicate value: \"Container\"",
            "spec.limits[3].maxLimitRequestRatio[cpu]: Invalid value: \"0.5\": ratio 0.5 is less than 1",
        ],
    );
}

#[test]
fn claims_volumes_and_storage_classes() {
    let claim = json!({"spec": {"accessModes": ["RWO"], "resources": {"requests": {"storage": "0"}},
        "storageClassName": "Fast_SSD", "dataSource": {"kind": "Snapshot", "name": "s"}}});
    holds_all(
        &messages("v1", "PersistentVolumeClaim", claim),
        &[
            "spec.accessModes: Unsupported value: \"RWO\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\"",
            "spec.resources[storage]: Invalid value: \"0\": must be greater than zero",
            "spec.dataSource: Invalid value: \"Snapshot\": must be 'PersistentVolumeClaim' when referencing the default apiGroup",
        ],
    );
    assert_eq!(
        messages("v1", "PersistentVolumeClaim", json!({"spec": {"accessModes": []}})),
        [
            "spec.accessModes: Required value: at least 1 access mode is required",
            "spec.resources[storage]: Required value"
        ]
    );
    let volume = json!({"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
        "hostPath": {"path": "/data/../etc", "type": "Folder"}, "nfs": {"server": "nfs", "path": "exports"},
        "local": {"path": "/mnt"}, "persistentVolumeReclaimPolicy": "Keep"}});
    holds_all(
        &messages("v1", "PersistentVolume", volume),
        &[
            "spec.nfs: Forbidden: may not specify more than 1 volume type",
            "spec.local: Forbidden: may not specify more than 1 volume type",
            "spec.nodeAffinity: Required value: Local volume requires node affinity",
            "spec.hostPath.path: Invalid value: \"/data/../etc\": must not contain '..'",
            "spec.nfs.path: Invalid value: \"exports\": must be an absolute path",
            "spec.persistentVolumeReclaimPolicy: Unsupported value: \"Keep\": supported values: \"Delete\", \"Recycle\", \"Retain\"",
        ],
    );
    let csi = json!({"spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "csi": {"driver": "Ebs_CSI"}}});
    let got = messages("v1", "PersistentVolume", csi);
    holds_all(&got, &["spec.csi.volumeHandle: Required value"]);
    assert!(
        got.iter()
            .any(|m| m.starts_with("spec.csi.driver: Invalid value: \"Ebs_CSI\": a lowercase RFC 1123 subdomain")),
        "{got:?}"
    );
    let class =
        json!({"provisioner": "", "parameters": {"": "x"}, "reclaimPolicy": "Recycle", "volumeBindingMode": "Later"});
    holds_all(
        &messages("storage.k8s.io/v1", "StorageClass", class),
        &[
            "provisioner: Required value",
            "parameters: Invalid value: \"\": field can not be empty.",
            "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
            "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
        ],
    );
}

#[test]
fn the_clusters_own_kinds() {
    let system = json!({"metadata": {"name": "system-high"}, "value": 10, "preemptionPolicy": "Always"});
    holds_all(
        &messages("scheduling.k8s.io/v1", "PriorityClass", system),
        &[
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: system-high is not a known system priority class",
            "preemptionPolicy: Unsupported value: \"Always\": supported values: \"PreemptLowerPriority\", \"Never\"",
        ],
    );
    let high = json!({"metadata": {"name": "high"}, "value": 2000000000, "preemptionPolicy": "Never"});
    assert_eq!(
        messages("scheduling.k8s.io/v1", "PriorityClass", high),
        ["value: Forbidden: maximum allowed value of a user defined priority is 1000000000"]
    );
    let class = json!({"spec": {"controller": "nginx", "parameters": {"kind": "Config", "name": "c", "scope": "Cluster", "namespace": "x"}}});
    assert_eq!(
        messages("networking.k8s.io/v1", "IngressClass", class),
        [
            "spec.controller: Invalid value: \"nginx\": must be a domain-prefixed path (such as \"acme.io/foo\")",
            "spec.parameters.namespace: Forbidden: `parameters.scope` is set to 'Cluster'",
        ]
    );
    let runtime = json!({"handler": "run.c", "overhead": {"podFixed": {"cpu": "-1"}}});
    holds_all(
        &messages("node.k8s.io/v1", "RuntimeClass", runtime),
        &["overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0"],
    );
    let service = json!({"metadata": {"name": "metrics"}, "spec": {"group": "metrics.k8s.io", "version": "v1beta1",
        "groupPriorityMinimum": 0, "versionPriority": 100, "insecureSkipTLSVerify": true, "caBundle": "AAAA",
        "service": {"namespace": "kube-system", "name": "metrics-server", "port": 443}}});
    holds_all(
        &messages("apiregistration.k8s.io/v1", "APIService", service),
        &[
            "metadata.name: Invalid value: \"metrics\": must be `spec.version+\".\"+spec.group`: \"v1beta1.metrics.k8s.io\"",
            "spec.groupPriorityMinimum: Invalid value: 0: must be positive and less than 20000",
            "spec.insecureSkipTLSVerify: Invalid value: true: may not be true if caBundle is present",
        ],
    );
    let slice = json!({"addressType": "IPv4", "ports": [{"name": "http", "protocol": "TCP"}, {"name": "http", "protocol": "ICMP"}],
        "endpoints": [{"addresses": []}, {"addresses": ["10.0.0.1", "fd00::1", "127.0.0.1", "nope"]}]});
    holds_all(
        &messages("discovery.k8s.io/v1", "EndpointSlice", slice),
        &[
            "ports[1].name: Duplicate value: \"http\"",
            "ports[1].protocol: Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\"",
            "endpoints[0].addresses: Required value: must contain at least 1 address",
            "endpoints[1].addresses: Invalid value: \"fd00::1\": must be an IPv4 address",
            "endpoints[1].addresses[2]: Invalid value: \"127.0.0.1\": may not be in the loopback range (127.0.0.0/8, ::1/128)",
            "endpoints[1].addresses[3]: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
        ],
    );
    let lease = json!({"spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1}});
    assert_eq!(messages("coordination.k8s.io/v1", "Lease", lease).len(), 2);
}

#[test]
fn what_a_stored_object_already_broke_does_not_block_its_updates() {
    // A selector value kgate stored before it checked them: the update that changes something
    // else goes through; one that adds another bad value does not.
    let budget = |value: &str, min: u32| json!({"spec": {"minAvailable": min, "selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": [value]}]}}});
    let old = budget("not a label!", 1);
    assert!(!messages("policy/v1", "PodDisruptionBudget", old.clone()).is_empty());
    assert_eq!(
        messages_after("policy/v1", "PodDisruptionBudget", budget("not a label!", 2), &old),
        Vec::<String>::new()
    );
    assert_eq!(messages_after("policy/v1", "PodDisruptionBudget", budget("also bad!", 2), &old).len(), 1);
}

#[test]
fn what_a_body_can_make_the_checks_report_is_bounded() {
    // A list of many bad values (or of many scopes against many resources) makes a bounded answer.
    let values: Vec<String> = (0..100_000).map(|_| "-".to_string()).collect();
    let budget =
        json!({"spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": values}]}}});
    assert_eq!(messages("policy/v1", "PodDisruptionBudget", budget).len(), MAX_CAUSES);
    let scopes: Vec<&str> = (0..2_000).map(|_| "BestEffort").collect();
    let hard: serde_json::Map<String, Value> = (0..2_000).map(|i| (format!("hugepages-{i}Mi"), json!("1"))).collect();
    let quota = json!({"spec": {"hard": hard, "scopes": scopes}});
    let got = errors("v1", "ResourceQuota", &quota, None);
    assert!(got.len() <= MAX_CAUSES);
    let bytes: usize = got.iter().map(|c| c.message.len()).sum();
    assert!(bytes < 10 << 20, "{bytes} bytes of causes");
}

#[test]
fn rolling_updates_are_checked_only_when_the_workload_rolls() {
    let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}});
    let ds = json!({"spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template,
        "updateStrategy": {"type": "OnDelete", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}}});
    assert_eq!(messages("apps/v1", "DaemonSet", ds), Vec::<String>::new());
    // A metric's selector is not checked by kube.
    let hpa = json!({"spec": {"maxReplicas": 2, "scaleTargetRef": {"kind": "Deployment", "name": "d"},
        "metrics": [{"type": "External", "external": {"metric": {"name": "m", "selector": {"matchLabels": {"bad key!": "x"}}},
            "target": {"type": "Value", "value": "1"}}}]}});
    assert_eq!(messages("autoscaling/v2", "HorizontalPodAutoscaler", hpa), Vec::<String>::new());
}

#[test]
fn a_pods_annotations_are_read_as_kube_reads_them() {
    let pod = |annotations: Value| {
        json!({"metadata": {"name": "p", "annotations": annotations},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    };
    let fine = json!({"seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
        "container.seccomp.security.alpha.kubernetes.io/web": "localhost/profiles/web.json",
        "container.apparmor.security.beta.kubernetes.io/web": "localhost/k8s-web",
        "controller.kubernetes.io/pod-deletion-cost": "-20"});
    assert_eq!(messages("v1", "Pod", pod(fine)), Vec::<String>::new());
    let bad = json!({"seccomp.security.alpha.kubernetes.io/pod": "default",
        "container.seccomp.security.alpha.kubernetes.io/web": "localhost/../etc/x",
        "container.apparmor.security.beta.kubernetes.io/db": "enforce",
        "controller.kubernetes.io/pod-deletion-cost": "+5",
        "kubernetes.io/config.mirror": "x"});
    let got = messages("v1", "Pod", pod(bad));
    holds_all(
        &got,
        &[
            "metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: \"default\": must be a valid seccomp profile",
            "metadata.annotations.container.seccomp.security.alpha.kubernetes.io/web: Invalid value: \"../etc/x\": must not contain '..'",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/db]: Invalid value: \"db\": container not found",
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/db]: Invalid value: \"enforce\": invalid AppArmor profile name: \"enforce\"",
            "metadata.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: \"+5\": must be a 32bit integer",
            "metadata.annotations[kubernetes.io/config.mirror]: Invalid value: \"x\": must set spec.nodeName if mirror pod annotation is set",
        ],
    );
    assert_eq!(got.len(), 6, "{got:?}");
    // A template's annotations, a StatefulSet's included, are a pod's.
    let sts = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"},
        "annotations": {"controller.kubernetes.io/pod-deletion-cost": "99999999999"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    assert_eq!(
        messages("apps/v1", "StatefulSet", sts),
        ["spec.template.annotations[controller.kubernetes.io/pod-deletion-cost]: Invalid value: \"99999999999\": must be a 32bit integer"]
    );
    // A template's labels and annotations are an object's, its annotations' size bounded.
    let deploy = json!({"spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {
        "labels": {"a": "b", "bad key!": "x"}, "annotations": {"big": "x".repeat(300 * 1024)}},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
    let got = messages("apps/v1", "Deployment", deploy);
    holds_all(&got, &["spec.template.annotations: Too long: must have at most 262144 bytes"]);
    assert!(got.iter().any(|g| g.starts_with("spec.template.labels: Invalid value: \"bad key!\"")), "{got:?}");
    // An AppArmor annotation is the pod's from its creation on.
    let (old, new) = (pod(json!({})), pod(json!({"container.apparmor.security.beta.kubernetes.io/web": "unconfined"})));
    assert_eq!(
        update_messages("Pod", &old, &new),
        ["metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Forbidden: may not add AppArmor annotations"]
    );
    assert_eq!(
        update_messages("Pod", &new, &old),
        ["metadata.annotations[container.apparmor.security.beta.kubernetes.io/web]: Forbidden: may not remove or update AppArmor annotations"]
    );
}

#[test]
fn a_claims_two_data_sources_agree() {
    let claim = |spec: Value| {
        let mut spec = spec;
        spec["accessModes"] = json!(["ReadWriteOnce"]);
        spec["resources"] = json!({"requests": {"storage": "1Gi"}});
        json!({"metadata": {"name": "c"}, "spec": spec})
    };
    let source = json!({"kind": "PersistentVolumeClaim", "name": "a"});
    let mut made = claim(json!({"dataSource": source}));
    crate::registry::defaults::claim_data_sources(&mut made);
    assert_eq!(made["spec"]["dataSourceRef"], source);
    assert_eq!(messages("v1", "PersistentVolumeClaim", made), Vec::<String>::new());
    let mut back =
        claim(json!({"dataSourceRef": {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "s"}}));
    crate::registry::defaults::claim_data_sources(&mut back);
    assert_eq!(back["spec"]["dataSource"]["kind"], "VolumeSnapshot");
    let mut populated = claim(json!({"dataSource": {"apiGroup": "example.io", "kind": "Seed", "name": "s"}}));
    crate::registry::defaults::claim_data_sources(&mut populated);
    assert!(populated["spec"].get("dataSource").is_none() && populated["spec"].get("dataSourceRef").is_none());
    let mut elsewhere =
        claim(json!({"dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "a", "namespace": "other"}}));
    crate::registry::defaults::claim_data_sources(&mut elsewhere);
    assert!(elsewhere["spec"].get("dataSource").is_none(), "a source in another namespace has no old form");
    let differ = claim(json!({"dataSource": source, "dataSourceRef": {"kind": "PersistentVolumeClaim", "name": "b"}}));
    assert_eq!(
        messages("v1", "PersistentVolumeClaim", differ),
        ["spec: Invalid value: \"spec.dataSource\": must match dataSourceRef"]
    );
}

#[test]
fn a_refused_value_is_shown_only_so_far() {
    // kube shows a mandatory FlowSchema's whole spec; a spec of a megabyte must not make a message of one.
    let subjects: Vec<Value> =
        (0..20_000).map(|i| json!({"kind": "User", "user": {"name": format!("u{i}")}})).collect();
    let fs = json!({"metadata": {"name": "exempt"}, "spec": {"matchingPrecedence": 1,
        "priorityLevelConfiguration": {"name": "exempt"}, "rules": [{"subjects": subjects,
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
    let got = errors("flowcontrol.apiserver.k8s.io/v1", "FlowSchema", &fs, None);
    let spec = got.iter().find(|c| c.field == "spec").expect("the fixed spec is refused");
    assert!(spec.message.len() <= MAX_MESSAGE + 3 && spec.message.ends_with("..."), "{}", spec.message.len());
}

#[test]
fn a_bad_deletion_cost_once_stored_may_change() {
    let pod = |cost: &str| {
        json!({"metadata": {"name": "p", "annotations": {"controller.kubernetes.io/pod-deletion-cost": cost}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]}})
    };
    // As kube's `AllowInvalidPodDeletionCost`: once the old pod had a bad one, any goes.
    assert!(errors("v1", "Pod", &pod("+6"), Some(&pod("+5"))).is_empty());
    assert_eq!(errors("v1", "Pod", &pod("+6"), Some(&pod("5"))).len(), 1);
}
