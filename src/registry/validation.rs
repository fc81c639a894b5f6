//! kube's validation of the built-in types beyond what their schema's types say (kube 1.33's
//! `pkg/apis/core/validation` and `pkg/apis/apps/validation`), for the checks clients and operators
//! meet: a pod spec's containers (names, images, ports), its restart and DNS policies, a workload's
//! selector and template labels, a Service's type and ports, ConfigMap and Secret keys. Each check is
//! keyed by the Go struct it belongs to and runs wherever that struct appears (a Pod's spec and every
//! template's alike), by a walk along the schema (`proto::visit`), with kube's field paths and words.
//!
//! Not checked: the many rarer rules (volume sources, probes' handlers, affinity terms, resource
//! quantities against limits, security contexts), which kube refuses and kgate stores.

use serde_json::{Map, Value};

use crate::meta;
use crate::proto::visit::Path;
use crate::status::{cause, Cause};

/// The kinds holding a checked struct; other kinds are not walked at all.
const CHECKED: &[&str] = &[
    "Pod",
    "PodTemplate",
    "ReplicationController",
    "Deployment",
    "ReplicaSet",
    "DaemonSet",
    "StatefulSet",
    "Job",
    "CronJob",
    "Service",
    "ConfigMap",
    "Secret",
];

/// Causes reported at most: an object of a hundred thousand empty containers (a few bytes each as
/// sent) must not make an answer of megabytes. kube lists them all; the first ones tell the client
/// what is wrong.
const MAX_CAUSES: usize = 256;

/// The protocols a port may name (kube's `supportedPortProtocols`, listed sorted as kube lists a set).
const PROTOCOLS: &[&str] = &["SCTP", "TCP", "UDP"];

/// kube's checks of `obj`, an object of the built-in `api_version`/`kind` (defaulted already, as kube
/// validates after defaulting).
pub fn errors(api_version: &str, kind: &str, obj: &Value) -> Vec<Cause> {
    if !CHECKED.contains(&kind) {
        return Vec::new();
    }
    let mut causes = Vec::new();
    // Their checks are of their own top-level keys: no walk, so no copy of what may be a megabyte.
    if let ("v1", "ConfigMap" | "Secret", Some(map)) = (api_version, kind, obj.as_object()) {
        let name = if kind == "ConfigMap" { "core.v1.ConfigMap" } else { "core.v1.Secret" };
        check(name, map, &Path::default(), &mut causes);
        return causes;
    }
    // The walk makes nothing (a budget of 0), so the copy is only what the walk's signature asks for.
    crate::proto::visit::visit_structs(api_version, kind, &mut obj.clone(), 0, &mut |name, map, path| {
        if causes.len() < MAX_CAUSES {
            check(name, map, path, &mut causes)
        }
    });
    causes.truncate(MAX_CAUSES);
    causes
}

/// kube's checks of an update from `old` to `new` beyond those of the object itself: fields a type
/// keeps once set (a workload's selector; a ConfigMap's or Secret's data once `immutable`, a Secret's
/// type).
pub fn update_errors(kind: &str, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match kind {
        // kube 1.33's strategies for apps/v1 (the only version served).
        "Deployment" | "ReplicaSet" | "DaemonSet" => {
            let (was, is) = (&old["spec"]["selector"], &new["spec"]["selector"]);
            if was != is {
                invalid(&mut causes, "spec.selector".into(), go_selector(is), "field is immutable");
            }
        }
        "ConfigMap" | "Secret" => {
            if old["immutable"] == true {
                let forbid = |causes: &mut Vec<Cause>, at: &str| {
                    causes.push(cause(
                        "FieldValueForbidden",
                        at,
                        "Forbidden: field is immutable when `immutable` is set",
                    ))
                };
                if new["immutable"] != true {
                    forbid(&mut causes, "immutable");
                }
                let fields: &[&str] = if kind == "ConfigMap" { &["data", "binaryData"] } else { &["data"] };
                for f in fields {
                    if old.get(*f) != new.get(*f) {
                        forbid(&mut causes, f);
                    }
                }
            }
            if kind == "Secret" && old["type"] != new["type"] {
                invalid(&mut causes, "type".into(), shown(&new["type"]), "field is immutable");
            }
        }
        _ => {}
    }
    causes
}

fn check(name: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    match name {
        "core.v1.PodSpec" => pod_spec(map, path, causes),
        "core.v1.Container" => container(map, path, causes),
        "core.v1.ContainerPort" => container_port(map, path, causes),
        "core.v1.ServiceSpec" => service_spec(map, path, causes),
        "core.v1.ServicePort" => service_port(map, path, causes),
        // kube's words name a ReplicaSet's selector as a Deployment's.
        "apps.v1.DeploymentSpec" | "apps.v1.ReplicaSetSpec" => workload_spec("deployment", map, path, causes),
        "apps.v1.DaemonSetSpec" => workload_spec("daemonset", map, path, causes),
        "apps.v1.StatefulSetSpec" => workload_spec("statefulset", map, path, causes),
        "core.v1.ConfigMap" => {
            for field in ["data", "binaryData"] {
                config_keys(map, field, path, causes);
            }
        }
        "core.v1.Secret" => config_keys(map, "data", path, causes),
        _ => {}
    }
}

fn required(causes: &mut Vec<Cause>, at: String) {
    causes.push(cause("FieldValueRequired", &at, "Required value"));
}

fn invalid(causes: &mut Vec<Cause>, at: String, shown: String, why: &str) {
    causes.push(cause("FieldValueInvalid", &at, format!("Invalid value: {shown}: {why}")));
}

/// Go's `%q` of a string, or the JSON of anything else.
fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn not_supported(causes: &mut Vec<Cause>, at: String, value: &Value, supported: &[&str]) {
    let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
    let message = format!("Unsupported value: {}: supported values: {}", shown(value), list.join(", "));
    causes.push(cause("FieldValueNotSupported", &at, message));
}

/// A string field that must be one of `supported` (and is required: defaults have filled it if the
/// client left it out).
fn one_of(map: &Map<String, Value>, field: &str, path: &Path, supported: &[&str], causes: &mut Vec<Cause>) {
    match map.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s.is_empty() => required(causes, path.child(field)),
        Some(Value::String(s)) if supported.contains(&s.as_str()) => {}
        Some(v) => not_supported(causes, path.child(field), v, supported),
    }
}

/// A port number, if set: 1 to 65535 (kube's `IsValidPortNum`); 0 passes where kube takes it as unset
/// (`zero_unset`: a host port, or a container port whose absence is reported as Required).
fn port_number(map: &Map<String, Value>, field: &str, path: &Path, zero_unset: bool, causes: &mut Vec<Cause>) {
    let checked = |n: &i64| !((1..=65535).contains(n) || zero_unset && *n == 0);
    if let Some(n) = map.get(field).and_then(Value::as_i64).filter(checked) {
        invalid(causes, path.child(field), n.to_string(), "must be between 1 and 65535, inclusive");
    }
}

fn is_empty(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        _ => false,
    }
}

fn pod_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("containers")) {
        required(causes, path.child("containers"));
    }
    // Names are unique across the pod's containers and init containers: kube checks the containers
    // first, then the init containers against them (an empty name is only Required, in `container`).
    let mut seen = std::collections::HashSet::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in map.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let Some(name) = c.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
            if !seen.insert(name) {
                let at = format!("{}[{i}].name", path.child(list));
                causes.push(cause("FieldValueDuplicate", &at, format!("Duplicate value: {name:?}")));
            }
        }
    }
    one_of(map, "restartPolicy", path, &["Always", "OnFailure", "Never"], causes);
    one_of(map, "dnsPolicy", path, &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"], causes);
}

fn container(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    match map.get("name").and_then(Value::as_str) {
        None | Some("") => required(causes, path.child("name")),
        Some(name) => {
            if let Err(why) = meta::validate_dns1123_label(name) {
                invalid(causes, path.child("name"), format!("{name:?}"), &why);
            }
        }
    }
    if is_empty(map.get("image")) {
        required(causes, path.child("image"));
    }
}

fn container_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if is_empty(map.get("containerPort")) {
        required(causes, path.child("containerPort"));
    }
    port_number(map, "containerPort", path, true, causes);
    port_number(map, "hostPort", path, true, causes);
    one_of(map, "protocol", path, PROTOCOLS, causes);
}

fn service_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    one_of(map, "type", path, TYPES, causes);
    let headless = map.get("clusterIP").and_then(Value::as_str) == Some("None");
    let external = map.get("type").and_then(Value::as_str) == Some("ExternalName");
    let ports = map.get("ports").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if ports.is_empty() && !headless && !external {
        required(causes, path.child("ports"));
    }
    // With more than one port, each is named (kube: the names tell the ports apart in Endpoints).
    if ports.len() > 1 {
        for (i, p) in ports.iter().enumerate() {
            if is_empty(p.get("name")) {
                required(causes, format!("{}[{i}].name", path.child("ports")));
            }
        }
    }
}

fn service_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    port_number(map, "port", path, false, causes);
    one_of(map, "protocol", path, PROTOCOLS, causes);
}

/// A Deployment's, ReplicaSet's, DaemonSet's or StatefulSet's spec (`what`, as kube's words name it): a
/// selector that selects, and the template it selects.
fn workload_spec(what: &str, map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(n) = map.get("replicas").and_then(Value::as_i64).filter(|n| *n < 0) {
        invalid(causes, path.child("replicas"), n.to_string(), "must be greater than or equal to 0");
    }
    let selector = match map.get("selector") {
        None | Some(Value::Null) => return required(causes, path.child("selector")),
        Some(s) => s,
    };
    let empty = ["matchLabels", "matchExpressions"].iter().all(|f| match selector.get(*f) {
        Some(Value::Object(m)) => m.is_empty(),
        Some(Value::Array(a)) => a.is_empty(),
        _ => true,
    });
    if empty {
        let why = format!("empty selector is invalid for {what}");
        return invalid(causes, path.child("selector"), go_selector(selector), &why);
    }
    let written = map.get("template").and_then(|t| t["metadata"]["labels"].as_object());
    let labels: std::collections::BTreeMap<String, String> =
        written.into_iter().flatten().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
    // A selector kube cannot parse is refused by the schema's own checks; only one that parses is
    // held against the template.
    if let Some(s) = crate::selector::object::Selector::parse(selector) {
        if !s.matches(&labels) {
            // Go's `%#v` of the map, as kube's message shows it.
            let shown = match written {
                None => "map[string]string(nil)".to_string(),
                Some(_) => format!(
                    "map[string]string{{{}}}",
                    labels.iter().map(|(k, v)| format!("{k:?}:{v:?}")).collect::<Vec<_>>().join(", ")
                ),
            };
            let at = format!("{}.metadata.labels", path.child("template"));
            invalid(causes, at, shown, "`selector` does not match template `labels`");
        }
    }
}

/// Go's `%#v` of a selector, as kube's messages show it (a map or list sent is shown, empty or not;
/// one left out is nil).
fn go_selector(v: &Value) -> String {
    let strings = |v: &Value| -> String {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|s| format!("{s:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let labels = match v.get("matchLabels").and_then(Value::as_object) {
        Some(m) => {
            let mut pairs: Vec<String> =
                m.iter().map(|(k, v)| format!("{k:?}:{:?}", v.as_str().unwrap_or_default())).collect();
            pairs.sort();
            format!("{{{}}}", pairs.join(", "))
        }
        None => "(nil)".to_string(),
    };
    let exprs = match v.get("matchExpressions").and_then(Value::as_array) {
        Some(list) => {
            let each: Vec<String> = list
                .iter()
                .map(|e| {
                    let values = match e.get("values") {
                        Some(vs) if vs.is_array() => format!("[]string{{{}}}", strings(vs)),
                        _ => "[]string(nil)".to_string(),
                    };
                    format!(
                        "v1.LabelSelectorRequirement{{Key:{:?}, Operator:{:?}, Values:{values}}}",
                        e["key"].as_str().unwrap_or_default(),
                        e["operator"].as_str().unwrap_or_default()
                    )
                })
                .collect();
            format!("{{{}}}", each.join(", "))
        }
        None => "(nil)".to_string(),
    };
    format!("v1.LabelSelector{{MatchLabels:map[string]string{labels}, MatchExpressions:[]v1.LabelSelectorRequirement{exprs}}}")
}

/// The keys of a ConfigMap's or Secret's `field`: kube's `IsConfigMapKey`, each failing rule its own
/// error at `field[key]`.
fn config_keys(map: &Map<String, Value>, field: &str, path: &Path, causes: &mut Vec<Cause>) {
    const PATTERN: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    for key in map.get(field).and_then(Value::as_object).into_iter().flat_map(|m| m.keys()) {
        let mut why = Vec::new();
        if key.len() > 253 {
            why.push("must be no more than 253 characters");
        }
        if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
            why.push(PATTERN);
        }
        match key.as_str() {
            "." => why.push("must not be '.'"),
            ".." => why.push("must not be '..'"),
            k if k.starts_with("..") => why.push("must not start with '..'"),
            _ => {}
        }
        for w in why {
            invalid(causes, format!("{}[{key}]", path.child(field)), format!("{key:?}"), w);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holds_all(got: &[String], wants: &[&str]) {
        for want in wants {
            assert!(got.iter().any(|g| g == want), "{want} in {got:?}");
        }
    }

    fn messages(api_version: &str, kind: &str, obj: Value) -> Vec<String> {
        errors(api_version, kind, &obj).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
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
        let headless = json!({"spec": {"clusterIP": "None", "type": "ClusterIP"}});
        assert!(messages("v1", "Service", headless).is_empty());
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
}
