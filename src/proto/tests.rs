//! Tests for protobuf decoding: bodies built with k8s-pb and bodies captured from kubectl 1.32.

use super::*;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use k8s_pb::apimachinery::pkg::util::intstr::IntOrString;
use prost::Message as _;
use serde_json::json;
use std::collections::BTreeMap;

/// Wraps an encoded object in the `k8s\0` + runtime.Unknown envelope, as client-go does.
fn envelope(api_version: &str, kind: &str, object: &impl prost::Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta { api_version: Some(api_version.into()), kind: Some(kind.into()) }),
        raw: Some(object.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

/// ObjectMeta as Go's marshaller writes it: every non-pointer field present, zero or not.
fn go_meta(name: &str) -> meta::ObjectMeta {
    meta::ObjectMeta {
        name: Some(name.into()),
        generate_name: Some(String::new()),
        namespace: Some(String::new()),
        self_link: Some(String::new()),
        uid: Some(String::new()),
        resource_version: Some(String::new()),
        generation: Some(0),
        creation_timestamp: Some(meta::Time::default()),
        ..Default::default()
    }
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn fixture(name: &str) -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/proto/testdata").join(name);
    let body = std::fs::read(&path).expect("fixture exists");
    decode(&body).expect("fixture decodes")
}

#[test]
fn configmap_with_data_and_binary_data() {
    let cm = core::ConfigMap {
        metadata: Some(go_meta("cfg")),
        data: map(&[("a", "b")]),
        binary_data: [("bin".to_string(), vec![0u8, 255, 1])].into(),
        immutable: None,
    };
    let v = decode(&envelope("v1", "ConfigMap", &cm)).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cfg", "creationTimestamp": null},
            "data": {"a": "b"},
            "binaryData": {"bin": "AP8B"}
        })
    );
}

#[test]
fn secret_bytes_become_base64() {
    let secret = core::Secret {
        metadata: Some(go_meta("s")),
        immutable: None,
        data: [("password".to_string(), b"hunter2".to_vec())].into(),
        string_data: map(&[("user", "admin")]),
        r#type: Some("Opaque".into()),
    };
    let v = decode(&envelope("v1", "Secret", &secret)).unwrap();
    assert_eq!(v["data"], json!({"password": "aHVudGVyMg=="}));
    assert_eq!(v["stringData"], json!({"user": "admin"}));
    assert_eq!(v["type"], "Opaque");
}

#[test]
fn deployment_with_full_container() {
    use k8s_pb::api::apps::v1 as apps;
    let container = core::Container {
        name: Some("web".into()),
        image: Some("nginx".into()),
        ports: vec![core::ContainerPort {
            name: Some("http".into()),
            host_port: Some(0),
            container_port: Some(80),
            protocol: Some("TCP".into()),
            host_ip: Some(String::new()),
        }],
        env: vec![core::EnvVar { name: Some("MODE".into()), value: Some("prod".into()), value_from: None }],
        resources: Some(core::ResourceRequirements {
            limits: [("memory".to_string(), Quantity { string: Some("128Mi".into()) })].into(),
            requests: [("cpu".to_string(), Quantity { string: Some("250m".into()) })].into(),
            claims: vec![],
        }),
        readiness_probe: Some(core::Probe {
            handler: Some(core::ProbeHandler {
                http_get: Some(core::HttpGetAction {
                    path: Some("/healthz".into()),
                    port: Some(IntOrString { r#type: Some(1), int_val: Some(0), str_val: Some("http".into()) }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            initial_delay_seconds: Some(0),
            period_seconds: Some(5),
            ..Default::default()
        }),
        stdin: Some(false),
        ..Default::default()
    };
    let deployment = apps::Deployment {
        metadata: Some(go_meta("web")),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector { match_labels: map(&[("app", "web")]), match_expressions: vec![] }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta { labels: map(&[("app", "web")]), ..go_meta("") }),
                spec: Some(core::PodSpec { containers: vec![container], ..Default::default() }),
            }),
            min_ready_seconds: Some(0),
            ..Default::default()
        }),
        status: Some(Default::default()),
    };
    let v = decode(&envelope("apps/v1", "Deployment", &deployment)).unwrap();
    // replicas is *int32, so an explicit 0 survives; minReadySeconds is a plain int32.
    assert_eq!(v["spec"]["replicas"], 0);
    assert!(v["spec"].get("minReadySeconds").is_none());
    // strategy is a non-pointer struct: Go writes it even when absent.
    assert_eq!(v["spec"]["strategy"], json!({}));
    assert_eq!(v["status"], json!({}));
    assert_eq!(v["spec"]["template"]["metadata"], json!({"creationTimestamp": null, "labels": {"app": "web"}}));
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"][0],
        json!({
            "name": "web",
            "image": "nginx",
            "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}],
            "env": [{"name": "MODE", "value": "prod"}],
            "resources": {"limits": {"memory": "128Mi"}, "requests": {"cpu": "250m"}},
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 5}
        })
    );
}

#[test]
fn int_or_string_number() {
    let svc = core::Service {
        metadata: Some(go_meta("svc")),
        spec: Some(core::ServiceSpec {
            ports: vec![core::ServicePort {
                port: Some(80),
                target_port: Some(IntOrString { r#type: Some(0), int_val: Some(8080), str_val: Some(String::new()) }),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let v = decode(&envelope("v1", "Service", &svc)).unwrap();
    assert_eq!(v["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(v["spec"]["ports"][0]["port"], 80);
}

#[test]
fn self_subject_access_review() {
    use k8s_pb::api::authorization::v1 as authz;
    let review = authz::SelfSubjectAccessReview {
        metadata: Some(go_meta("")),
        spec: Some(authz::SelfSubjectAccessReviewSpec {
            resource_attributes: Some(authz::ResourceAttributes {
                namespace: Some("dev".into()),
                verb: Some("list".into()),
                group: Some("apps".into()),
                resource: Some("deployments".into()),
                ..Default::default()
            }),
            non_resource_attributes: None,
        }),
        status: Some(Default::default()),
    };
    let v = decode(&envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview", &review)).unwrap();
    assert_eq!(
        v,
        json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": null},
            "spec": {"resourceAttributes": {
                "namespace": "dev", "verb": "list", "group": "apps", "resource": "deployments"
            }},
            "status": {"allowed": false}
        })
    );
}

#[test]
fn creation_timestamp_null_absent_and_set() {
    let absent = core::Namespace {
        metadata: Some(meta::ObjectMeta { name: Some("a".into()), ..Default::default() }),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "Namespace", &absent)).unwrap();
    // A non-pointer Time is always written by Go, as null when zero.
    assert_eq!(v["metadata"]["creationTimestamp"], Value::Null);

    let set = core::Namespace {
        metadata: Some(meta::ObjectMeta {
            name: Some("a".into()),
            creation_timestamp: Some(meta::Time { seconds: Some(1_700_000_000), nanos: Some(123) }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let v = decode(&envelope("v1", "Namespace", &set)).unwrap();
    assert_eq!(v["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
}

#[test]
fn lease_micro_time() {
    use k8s_pb::api::coordination::v1 as coord;
    let lease = coord::Lease {
        metadata: Some(go_meta("l")),
        spec: Some(coord::LeaseSpec {
            holder_identity: Some("me".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime { seconds: Some(0), nanos: Some(1_500) }),
            ..Default::default()
        }),
    };
    let v = decode(&envelope("coordination.k8s.io/v1", "Lease", &lease)).unwrap();
    assert_eq!(
        v["spec"],
        json!({"holderIdentity": "me", "leaseDurationSeconds": 15,
               "renewTime": "1970-01-01T00:00:00.000001Z"})
    );
}

#[test]
fn eviction_with_delete_options() {
    use k8s_pb::api::policy::v1 as policy;
    let eviction = policy::Eviction {
        metadata: Some(meta::ObjectMeta {
            name: Some("p1".into()),
            namespace: Some("default".into()),
            ..Default::default()
        }),
        delete_options: Some(meta::DeleteOptions { grace_period_seconds: Some(0), ..Default::default() }),
    };
    let v = decode(&envelope("policy/v1", "Eviction", &eviction)).unwrap();
    assert_eq!(v["deleteOptions"], json!({"gracePeriodSeconds": 0}));
    assert_eq!(v["metadata"]["namespace"], "default");
}

#[test]
fn bad_magic_is_rejected() {
    let err = decode(b"{\"kind\":\"ConfigMap\"}").unwrap_err();
    assert!(matches!(err, ProtoError::BadMagic), "{err}");
    assert!(matches!(decode(b""), Err(ProtoError::BadMagic)));
}

#[test]
fn truncated_body_is_rejected() {
    let cm = core::ConfigMap { metadata: Some(go_meta("cfg")), data: map(&[("key", "value")]), ..Default::default() };
    let body = envelope("v1", "ConfigMap", &cm);
    for cut in [5, body.len() / 2, body.len() - 1] {
        assert!(decode(&body[..cut]).is_err(), "cut at {cut} decoded");
    }
}

#[test]
fn unknown_kind_is_rejected() {
    let body = envelope("example.com/v1", "Widget", &core::ConfigMap::default());
    let err = decode(&body).unwrap_err();
    assert!(matches!(err, ProtoError::UnknownKind { .. }), "{err}");
    assert!(err.to_string().contains("Widget"));
}

#[test]
fn hostile_nesting_is_bounded() {
    // A JSONSchemaProps nested through `not` thousands of times must fail, not overflow.
    let mut raw: Vec<u8> = Vec::new();
    for _ in 0..5000 {
        let mut outer = Vec::new();
        prost::encoding::bytes::encode(28, &raw, &mut outer);
        raw = outer;
    }
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some("apiextensions.k8s.io/v1".into()),
            kind: Some("JSONSchemaProps".into()),
        }),
        raw: Some(raw),
        ..Default::default()
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    assert!(matches!(decode(&body), Err(ProtoError::TooDeep)));
}

#[test]
fn durations_print_like_go() {
    assert_eq!(format::duration(0), "0s");
    assert_eq!(format::duration(1_500_000), "1.5ms");
    assert_eq!(format::duration(3_600_000_000_000), "1h0m0s");
    assert_eq!(format::duration(-90_000_000_000), "-1m30s");
    assert_eq!(format::duration(2_000_000_001), "2.000000001s");
}

#[test]
fn kubectl_configmap_fixtures() {
    assert_eq!(
        fixture("configmap.pb"),
        json!({"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"creationTimestamp": null, "name": "x"},
               "data": {"a": "b", "c": "d"}})
    );
    let v = fixture("configmap_binary.pb");
    assert_eq!(v["binaryData"], json!({"blob": "AP/+Ymlu"}));
    assert_eq!(v["data"], json!({"a": "b"}));
}

#[test]
fn kubectl_secret_fixtures() {
    let v = fixture("secret_generic.pb");
    assert_eq!(v["data"], json!({"pass": "cEBzcw==", "user": "YWRtaW4="}));
    let v = fixture("secret_docker.pb");
    assert_eq!(v["type"], "kubernetes.io/dockerconfigjson");
    assert!(v["data"][".dockerconfigjson"].is_string());
}

#[test]
fn kubectl_workload_fixtures() {
    let v = fixture("deployment.pb");
    assert_eq!(v["spec"]["replicas"], 2);
    assert_eq!(
        v["spec"]["template"]["spec"]["containers"],
        json!([{"image": "nginx", "name": "nginx", "ports": [{"containerPort": 80}],
                "resources": {}}])
    );
    let v = fixture("job.pb");
    assert_eq!(v["spec"]["template"]["spec"]["restartPolicy"], "Never");
    let v = fixture("cronjob.pb");
    assert_eq!(v["spec"]["schedule"], "*/5 * * * *");
    assert_eq!(v["spec"]["jobTemplate"]["metadata"]["name"], "cj1");
    let v = fixture("service_clusterip.pb");
    assert_eq!(v["spec"]["ports"], json!([{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]));
    let v = fixture("pdb.pb");
    assert_eq!(v["spec"]["minAvailable"], "50%");
    let v = fixture("ingress.pb");
    assert_eq!(
        v["spec"]["rules"][0]["http"]["paths"][0]["backend"],
        json!({"service": {"name": "svc1", "port": {"number": 80}}})
    );
}

#[test]
fn kubectl_rbac_and_core_fixtures() {
    assert_eq!(
        fixture("role.pb")["rules"][1],
        json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]})
    );
    assert_eq!(fixture("rolebinding.pb")["subjects"][1]["namespace"], "default");
    assert_eq!(fixture("clusterrole.pb")["rules"], json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]));
    assert_eq!(fixture("clusterrolebinding.pb")["roleRef"]["name"], "cr1");
    assert_eq!(
        fixture("namespace.pb"),
        json!({"apiVersion": "v1", "kind": "Namespace",
               "metadata": {"creationTimestamp": null, "name": "ns1"},
               "spec": {}, "status": {}})
    );
    assert_eq!(fixture("serviceaccount.pb")["metadata"]["name"], "sa1");
}

#[test]
fn kubectl_auth_fixtures() {
    assert_eq!(
        fixture("ssar.pb")["spec"],
        json!({"resourceAttributes": {"namespace": "default", "resource": "pods", "verb": "get"}})
    );
    assert_eq!(fixture("ssrr.pb")["spec"], json!({"namespace": "default"}));
    assert_eq!(fixture("ssr.pb")["kind"], "SelfSubjectReview");
    let v = fixture("token_request.pb");
    assert_eq!(v["kind"], "TokenRequest");
    assert_eq!(v["spec"]["expirationSeconds"], 3600);
}

/// A Pod whose spec holds `n` empty containers: two bytes each on the wire (field 2, length 0).
fn pod_of_empty_containers(n: usize) -> Vec<u8> {
    let spec: Vec<u8> = [0x12u8, 0x00].repeat(n);
    let mut pod = Vec::new();
    // Pod.spec is field 2, length-delimited.
    pod.push(0x12);
    prost::encoding::encode_varint(spec.len() as u64, &mut pod);
    pod.extend(spec);
    let unknown = Unknown {
        type_meta: Some(TypeMeta { api_version: Some("v1".into()), kind: Some("Pod".into()) }),
        raw: Some(pod),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

/// Each empty container decodes to a whole zero-valued Container; a body decodes to values in
/// proportion to its size, so a 3 MB body of them is refused before it is decoded.
#[test]
fn a_body_decodes_to_values_in_proportion_to_its_size() {
    let few = decode(&pod_of_empty_containers(500)).unwrap();
    assert_eq!(few["spec"]["containers"].as_array().unwrap().len(), 500);
    assert_eq!(few["spec"]["containers"][0], json!({"name": "", "resources": {}}));
    let body = pod_of_empty_containers(1_500_000);
    assert!(body.len() < 3_200_000, "{}", body.len());
    assert!(matches!(decode(&body), Err(ProtoError::Expands)));
}
