//! Inputs larger than a fuzzer tries (libFuzzer stops at 64 KiB here), grown step by step: what a parser
//! costs must grow no faster than its input, so no small request can cost a large amount. Each case
//! doubles its input three times and compares the time of the largest with the smallest (best of three
//! runs each, to keep the machine's noise out): eight times the input may take at most twenty times as
//! long (linear is eight; quadratic would be sixty-four).

mod common;

use std::time::{Duration, Instant};

/// Best of three runs of `f` on `input`.
fn best(f: fn(&[u8]), input: &[u8]) -> Duration {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f(input);
            t.elapsed()
        })
        .min()
        .unwrap()
}

/// `f` on inputs `make(n)`, `make(2n)`, `make(4n)`, `make(8n)`.
fn grows_linearly(what: &str, n: usize, make: impl Fn(usize) -> Vec<u8>, f: fn(&[u8])) {
    let inputs: Vec<Vec<u8>> = [1, 2, 4, 8].iter().map(|k| make(n * k)).collect();
    let times: Vec<Duration> = inputs.iter().map(|i| best(f, i)).collect();
    let sizes: Vec<usize> = inputs.iter().map(Vec::len).collect();
    let ratio = times[3].as_secs_f64() / times[0].as_secs_f64().max(1e-6);
    let size_ratio = sizes[3] as f64 / sizes[0] as f64;
    println!("{what}: sizes {sizes:?}, times {times:?}, x{ratio:.1} for x{size_ratio:.1} the input");
    assert!(ratio <= size_ratio * 2.5, "{what}: x{ratio:.1} the time for x{size_ratio:.1} the input ({times:?})");
}

fn json(v: serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(&v).unwrap()
}

#[test]
fn pod_updates_with_many_tolerations_and_gates() {
    // kube compares every old toleration with every new one; an update of a pod that keeps them all
    // must not cost their square.
    grows_linearly(
        "pod update: n tolerations and n scheduling gates kept",
        1000,
        |n| {
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x"}],
                    "tolerations": (0..n).map(|i| serde_json::json!({"key": format!("k{i}"), "operator": "Exists"})).collect::<Vec<_>>(),
                    "schedulingGates": (0..n).map(|i| serde_json::json!({"name": format!("g{i}")})).collect::<Vec<_>>()}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn pods_of_many_image_volumes_each_mounted() {
    // Image volumes are dropped (their gate is off in 1.33) with every mount of them: each mount is
    // looked up among the volumes gone, not compared with all of them.
    grows_linearly(
        "pod create: n image volumes, each mounted by the container",
        2000,
        |n| {
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x",
                    "volumeMounts": (0..n).map(|i| serde_json::json!({"name": format!("v{i}"), "mountPath": format!("/m{i}")})).collect::<Vec<_>>()}],
                    "volumes": (0..n).map(|i| serde_json::json!({"name": format!("v{i}"), "image": {"reference": "r"}})).collect::<Vec<_>>()}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn job_statuses_of_many_conditions_and_counts() {
    // A status write's checks look each terminal condition up among all of them: a few scans, not
    // one per pair.
    grows_linearly(
        "job status: n conditions",
        2000,
        |n| {
            json(serde_json::json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
                "status": {"succeeded": 1, "failed": 1, "collisionCount": 2,
                    "conditions": (0..n).map(|i| serde_json::json!({"type": format!("T{i}"), "status": "True"})).collect::<Vec<_>>()}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn yaml_aliases_of_a_large_anchor() {
    grows_linearly(
        "yaml: n aliases of an n-item anchor",
        500,
        |n| format!("a: &a [{}]\nb: [{}]\n", vec!["x"; n].join(", "), vec!["*a"; n].join(", ")).into_bytes(),
        kgate::fuzzing::body,
    );
}

#[test]
fn json_patches_copying_an_array_into_itself() {
    // From 16 copies on, the copies reach kube's 3 MiB bound: the cost stops growing at all.
    grows_linearly(
        "json patch: n self-doubling copies",
        16,
        |n| {
            let mut ops = vec![serde_json::json!({"op": "add", "path": "/x", "value": vec!["0123456789abcdef"; 64]})];
            ops.extend((0..n).map(|_| serde_json::json!({"op": "copy", "from": "/x", "path": "/x/-"})));
            [b"{}\0".to_vec(), json(serde_json::Value::Array(ops))].concat()
        },
        kgate::fuzzing::json_patch,
    );
}

#[test]
fn strategic_merges_of_long_lists() {
    let containers = |n: usize, image: &str| -> serde_json::Value {
        (0..n).map(|i| serde_json::json!({"name": format!("c{i}"), "image": image})).collect()
    };
    grows_linearly(
        "strategic merge: n containers over n",
        1000,
        |n| {
            let live = serde_json::json!({"spec": {"template": {"spec": {"containers": containers(n, "a")}}}});
            let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": containers(n, "b")}}}});
            [json(live), b"\0".to_vec(), json(patch)].concat()
        },
        kgate::fuzzing::strategic_merge,
    );
}

#[test]
fn applies_over_many_managers() {
    grows_linearly(
        "apply: n managers, n fields",
        200,
        |n| {
            let managed: Vec<_> = (0..n)
                .map(|i| serde_json::json!({"manager": format!("m{i}"), "operation": "Apply", "apiVersion": "apps/v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {format!("f:k{i}"): {}}}}}))
                .collect();
            let labels: serde_json::Map<_, _> = (0..n).map(|i| (format!("k{i}"), "v".into())).collect();
            let live = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": labels, "managedFields": managed}});
            let applied: serde_json::Map<_, _> = (0..n).map(|i| (format!("k{i}"), "w".into())).collect();
            let applied = serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": applied}});
            [json(live), b"\0".to_vec(), json(applied)].concat()
        },
        kgate::fuzzing::apply,
    );
}

#[test]
fn protobuf_of_empty_messages() {
    grows_linearly("protobuf: n empty containers", 20_000, common::pod_of_empty_containers, kgate::fuzzing::protobuf);
}

#[test]
fn selectors_with_many_terms_and_values() {
    grows_linearly(
        "selector: n terms of n values",
        40,
        |n| {
            let values: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
            (0..n).map(|i| format!("k{i} in ({})", values.join(","))).collect::<Vec<_>>().join(",").into_bytes()
        },
        kgate::fuzzing::selectors,
    );
}

#[test]
fn bodies_of_many_small_objects() {
    grows_linearly(
        "body: n small objects",
        5000,
        |n| json((0..n).map(|i| serde_json::json!({"name": format!("n{i}"), "v": i})).collect::<serde_json::Value>()),
        kgate::fuzzing::body,
    );
}

#[test]
fn schemas_and_objects_with_many_properties() {
    grows_linearly(
        "crd: n properties, an object with n fields",
        300,
        |n| {
            let props: serde_json::Map<_, _> = (0..n)
                .map(|i| {
                    (format!("p{i}"), serde_json::json!({"type": "string", "pattern": "^[a-z]+$", "default": "x"}))
                })
                .collect();
            let crd = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "ws.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "ws", "kind": "W"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}}}]}});
            let fields: serde_json::Map<_, _> = (0..n).map(|i| (format!("p{i}"), "abc".into())).collect();
            [json(crd), b"\0".to_vec(), json(serde_json::json!({"spec": fields}))].concat()
        },
        kgate::fuzzing::crd,
    );
}

#[test]
fn go_zero_values_of_many_empty_structs() {
    // Each empty container gains the fields Go writes for it, up to the bound on what is added.
    grows_linearly(
        "go_shape of a pod of empty containers",
        2_000,
        |n| {
            json(
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "spec": {"containers": vec![serde_json::json!({}); n]}}),
            )
        },
        |b| {
            let mut v: serde_json::Value = serde_json::from_slice(b).unwrap();
            kgate::proto::go_shape("v1", "Pod", &mut v);
        },
    );
}

#[test]
fn bodies_of_repeated_keys_deep_down() {
    grows_linearly(
        "body: n repeated keys at depth 100",
        20_000,
        |n| {
            let keys: String = (0..n).map(|i| format!("\"k{}\":1,", i % 500)).collect();
            format!("{}{{{keys}\"z\":0}}{}", "{\"a\":".repeat(100), "}".repeat(100)).into_bytes()
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn autoscaling_v1_metrics_carried_in_an_annotation() {
    // v1 carries every metric it has no field for as JSON in an annotation, which kgate reads on each
    // write; n metrics must cost n times one.
    grows_linearly(
        "autoscaling/v1: n metrics in the metrics annotation",
        2_000,
        |n| {
            let metric = serde_json::json!({"type": "Pods", "pods": {"metricName": "qps", "targetAverageValue": "10"}});
            let metrics = serde_json::to_string(&vec![metric; n]).unwrap();
            json(serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
                "metadata": {"name": "h", "annotations": {"autoscaling.alpha.kubernetes.io/metrics": metrics}},
                "spec": {"scaleTargetRef": {"kind": "Deployment", "name": "web"}, "maxReplicas": 3}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn quotas_with_many_scopes_and_resources() {
    // Every scope against every resource it cannot apply to: kube reports a pair each; kgate must not
    // spend their product.
    grows_linearly(
        "quota: n scopes, n hugepage resources",
        500,
        |n| {
            let hard: serde_json::Map<String, serde_json::Value> =
                (0..n).map(|i| (format!("hugepages-{i}Mi"), serde_json::json!("1"))).collect();
            json(serde_json::json!({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
                "spec": {"hard": hard, "scopes": vec!["BestEffort"; n]}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn webhooks_spread_constraints_and_bad_selector_values() {
    grows_linearly(
        "webhook: n resources in a rule, n match conditions",
        500,
        |n| {
            json(
                serde_json::json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "w"}, "webhooks": [{"name": "a.b.c", "sideEffects": "None", "admissionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://h"},
                    "rules": [{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"],
                        "resources": (0..n).map(|i| format!("r{i}/*")).chain((0..n).map(|i| format!("r{i}/s"))).collect::<Vec<_>>()}],
                    "matchConditions": (0..n).map(|i| serde_json::json!({"name": format!("c{}", i % 7), "expression": "true"})).collect::<Vec<_>>()}]}),
            )
        },
        kgate::fuzzing::body,
    );
    grows_linearly(
        "pod: n spread constraints, n bad selector values",
        500,
        |n| {
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x"}],
                    "topologySpreadConstraints": (0..n).map(|i| serde_json::json!({"maxSkew": 1, "topologyKey": format!("k{}", i % 3),
                        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "In",
                            "values": vec!["-"; 4]}]}})).collect::<Vec<_>>()}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn composite_resource_versions_and_cursors_of_many_parts() {
    // A list across shards resumes from a revision per shard; a client may send any number of parts.
    let composite = |n: usize| (0..n).map(|i| format!("default:{i}")).collect::<Vec<_>>().join(",");
    grows_linearly(
        "composite resourceVersion: n parts",
        5000,
        |n| composite(n).into_bytes(),
        kgate::fuzzing::continue_token,
    );
    grows_linearly(
        "continue token across shards: n parts",
        5000,
        |n| {
            use base64::Engine;
            let doc =
                serde_json::json!({"v": "kgate.dev/shards", "rv": composite(n), "shard": "default", "continue": "x"});
            base64::engine::general_purpose::URL_SAFE.encode(doc.to_string()).into_bytes()
        },
        kgate::fuzzing::continue_token,
    );
}

#[test]
fn apparmor_annotations_over_many_containers() {
    // Each AppArmor annotation names a container the pod must have: looking it up must not cost
    // every container again.
    grows_linearly(
        "pod: n AppArmor annotations and n containers",
        1000,
        |n| {
            let annotations: serde_json::Map<String, serde_json::Value> = (0..n)
                .map(|i| {
                    (format!("container.apparmor.security.beta.kubernetes.io/c{i}"), serde_json::json!("unconfined"))
                })
                .collect();
            json(
                serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": annotations},
                "spec": {"containers": (0..n).map(|i| serde_json::json!({"name": format!("c{i}"), "image": "x"})).collect::<Vec<_>>()}}),
            )
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn csi_nodes_of_many_drivers_updated() {
    grows_linearly(
        "CSINode update: n drivers kept",
        1000,
        |n| {
            json(serde_json::json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "n"},
                "spec": {"drivers": (0..n).map(|i| serde_json::json!({"name": format!("d{i}.example.com"), "nodeID": "x"})).collect::<Vec<_>>()}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn pods_of_many_mounts_devices_and_projected_files() {
    // Each mount is looked up among the devices and each device among the mounts, each projected
    // file's path among the others', and each ephemeral claim among the volumes: none may cost
    // the square of its list.
    grows_linearly(
        "pod: n mounts, n devices, n projected files, n ephemeral volumes",
        500,
        |n| {
            let mut volumes: Vec<serde_json::Value> = (0..n)
                .map(|i| {
                    serde_json::json!({"name": format!("e{i}"), "ephemeral": {"volumeClaimTemplate": {
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}}})
                })
                .collect();
            let items: Vec<serde_json::Value> =
                (0..n).map(|i| serde_json::json!({"key": "k", "path": format!("f{i}")})).collect();
            volumes.push(serde_json::json!({"name": "p", "projected": {"sources": [{"configMap": {"name": "c", "items": items}}]}}));
            let mounts: Vec<serde_json::Value> = (0..n)
                .map(|i| serde_json::json!({"name": "p", "mountPath": format!("/m{i}"), "subPath": "s"}))
                .collect();
            let devices: Vec<serde_json::Value> = (0..n)
                .map(|i| serde_json::json!({"name": format!("e{i}"), "devicePath": format!("/dev/d{i}")}))
                .collect();
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x", "volumeMounts": mounts, "volumeDevices": devices}],
                    "volumes": volumes}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn pods_of_many_containers_host_ports_and_tolerations() {
    // Host ports are compared across every container: through a set, not against each other.
    grows_linearly(
        "pod: n containers with host ports and envFrom, n tolerations",
        500,
        |n| {
            let containers: Vec<serde_json::Value> = (0..n)
                .map(|i| {
                    serde_json::json!({"name": format!("c{i}"), "image": "x",
                    "ports": [{"containerPort": 80, "hostPort": 8000 + i % 1000, "protocol": "TCP"}],
                    "envFrom": [{"configMapRef": {"name": "cm"}}]})
                })
                .collect();
            let tolerations: Vec<serde_json::Value> =
                (0..n).map(|i| serde_json::json!({"key": format!("k{i}"), "operator": "Exists"})).collect();
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": containers, "tolerations": tolerations}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn pods_of_many_ephemeral_containers_sysctls_and_windows_settings() {
    // Ephemeral containers' names and targets are looked up in sets, sysctls' names too; the
    // operating system's checks visit each container once.
    grows_linearly(
        "pod: n containers and n ephemeral containers targeting them, n sysctls, Windows host processes",
        500,
        |n| {
            let containers: Vec<serde_json::Value> = (0..n)
                .map(|i| {
                    serde_json::json!({"name": format!("c{i}"), "image": "x",
                    "securityContext": {"windowsOptions": {"hostProcess": true, "runAsUserName": format!("NT AUTHORITY\\u{i}")}}})
                })
                .collect();
            let ephemeral: Vec<serde_json::Value> = (0..n)
                .map(|i| serde_json::json!({"name": format!("e{i}"), "image": "x", "targetContainerName": format!("c{i}")}))
                .collect();
            let sysctls: Vec<serde_json::Value> =
                (0..n).map(|i| serde_json::json!({"name": format!("net.ipv4.s{i}"), "value": "1"})).collect();
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"os": {"name": "windows"}, "hostNetwork": true, "containers": containers,
                    "ephemeralContainers": ephemeral, "securityContext": {"sysctls": sysctls}}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn discovery_of_many_groups() {
    // A cluster's CRDs may each bring a group: discovery finds each group once, not among all others.
    grows_linearly(
        "discovery: n groups of one resource each",
        1000,
        |n| vec![b'g'; n],
        |input| {
            let base = kgate::resources::find("", "v1", "configmaps").unwrap();
            let defs: Vec<std::sync::Arc<kgate::resources::ResourceDef>> = (0..input.len())
                .map(|i| {
                    let mut d = (*base).clone();
                    d.group = format!("g{i}.example.com");
                    std::sync::Arc::new(d)
                })
                .collect();
            kgate::discovery::Discovery::build(defs.iter());
        },
    );
}

#[test]
fn custom_objects_of_many_values_outside_a_long_enum() {
    // Each value outside the enum is an error listing 4 KiB of the enum: the check stops at enough
    // errors to refuse, and looks every other value up in a set, not along the enum.
    grows_linearly(
        "crd: an enum of 1,000 values, an object of n values half outside it",
        20_000,
        |n| {
            let allowed: Vec<String> = (0..1000).map(|i| format!("value-{i}")).collect();
            let crd = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "ws.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "ws", "kind": "W"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {
                    "x": {"type": "array", "items": {"type": "string", "enum": allowed}}}}}}}}]}});
            let values: Vec<&str> = (0..n).map(|i| if i % 2 == 0 { "value-999" } else { "nope" }).collect();
            [json(crd), b"\0".to_vec(), json(serde_json::json!({"spec": {"x": values}}))].concat()
        },
        kgate::fuzzing::crd,
    );
}

#[test]
fn pod_statuses_of_many_custom_condition_types() {
    // Each condition type not the kubelet's is checked as a qualified name once, bad ones included.
    grows_linearly(
        "pod status: n condition types, half not qualified names",
        2000,
        |n| {
            json(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
                "status": {"conditions": (0..n).map(|i| serde_json::json!({
                    "type": if i % 2 == 0 { format!("example.com/t{i}") } else { format!("bad type {i}") },
                    "status": "True"})).collect::<Vec<_>>()}}))
        },
        kgate::fuzzing::body,
    );
}

#[test]
fn json_patches_removing_from_the_front_of_a_long_array() {
    // Each removal at the front shifts the whole array: quadratic in the patch and the array, until
    // the bound on shifts refuses the patch and the cost stops growing.
    grows_linearly(
        "json patch: n removals at the front of a 100n-item array",
        200,
        |n| {
            let target = json(serde_json::json!({"a": vec![0; 100 * n]}));
            let ops = vec![serde_json::json!({"op": "remove", "path": "/a/0"}); n];
            [target, b"\0".to_vec(), json(serde_json::Value::Array(ops))].concat()
        },
        kgate::fuzzing::json_patch,
    );
}

#[test]
fn crds_of_many_printer_columns_and_names() {
    // Columns and names are each checked once; past their bounds, not at all.
    grows_linearly(
        "crd: n printer columns, n short names and n categories",
        16,
        |n| {
            let columns: Vec<_> = (0..n)
                .map(|i| serde_json::json!({"name": format!("C{i}"), "type": "string", "jsonPath": format!(".spec.c{i}")}))
                .collect();
            let names: Vec<_> = (0..n).map(|i| format!("n{i}")).collect();
            let crd = serde_json::json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget", "shortNames": names, "categories": names},
                    "versions": [{"name": "v1", "served": true, "storage": true, "additionalPrinterColumns": columns,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]}});
            [json(crd), b"\0{}".to_vec()].concat()
        },
        kgate::fuzzing::crd,
    );
}
