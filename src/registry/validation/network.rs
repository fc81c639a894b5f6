//! Services' and Ingresses' checks: service types and ports, port names, ingress paths and backends.

use super::*;

pub(super) fn service_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    one_of(map, "type", path, TYPES, causes);
    let headless = map.get("clusterIP").and_then(Value::as_str) == Some("None");
    let external = map.get("type").and_then(Value::as_str) == Some("ExternalName");
    let ports = map.get("ports").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
    if ports.is_empty() && !headless && !external {
        required(causes, path.child("ports"));
    }
    let mut names = HashSet::new();
    for (i, p) in ports.iter().enumerate() {
        let Some(name) = p.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) else { continue };
        if !names.insert(name) {
            let at = format!("{}[{i}].name", path.child("ports"));
            duplicate(causes, &at, name);
        }
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

pub(super) fn service_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    port_number(map, "port", path, false, causes);
    one_of(map, "protocol", path, PROTOCOLS, causes);
    if let Some(name) = map.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
        dns_label(causes, path.child("name"), name);
    }
    // A number, or the name of a port of the pods.
    match map.get("targetPort") {
        Some(Value::String(name)) => {
            for why in port_name_errors(name) {
                invalid(causes, path.child("targetPort"), format!("{name:?}"), why);
            }
        }
        Some(Value::Number(_)) => port_number(map, "targetPort", path, false, causes),
        _ => {}
    }
}

/// What is wrong with a port's name (kube's `IsValidPortName`, an IANA service name).
pub(super) fn port_name_errors(name: &str) -> Vec<&'static str> {
    let mut why = Vec::new();
    if name.len() > 15 {
        why.push("must be no more than 15 characters");
    }
    if !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
        why.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)");
    }
    if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        why.push("must contain at least one letter (a-z)");
    }
    if name.contains("--") {
        why.push("must not contain consecutive hyphens");
    }
    if name.starts_with('-') || name.ends_with('-') {
        why.push("must not begin or end with a hyphen");
    }
    why
}

/// An Ingress rule's path (kube's `validateHTTPIngressPath`): a path type, and a path that is absolute
/// and, for `Exact` and `Prefix`, free of what would escape it.
pub(super) fn ingress_path(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let p = map.get("path").and_then(Value::as_str).unwrap_or_default();
    let at = path.child("path");
    match map.get("pathType").and_then(Value::as_str) {
        None | Some("") => causes.push(cause(
            "FieldValueRequired",
            &path.child("pathType"),
            "Required value: pathType must be specified",
        )),
        Some("Exact" | "Prefix") => {
            if !p.starts_with('/') {
                invalid(causes, at.clone(), format!("{p:?}"), "must be an absolute path");
            }
            for bad in ["//", "/./", "/../", "%2f", "%2F"] {
                if p.contains(bad) {
                    invalid(causes, at.clone(), format!("{p:?}"), &format!("must not contain '{bad}'"));
                }
            }
            for bad in ["/..", "/."] {
                if p.ends_with(bad) {
                    invalid(causes, at.clone(), format!("{p:?}"), &format!("cannot end with '{bad}'"));
                }
            }
        }
        Some("ImplementationSpecific") => {
            if !p.is_empty() && !p.starts_with('/') {
                invalid(causes, at, format!("{p:?}"), "must be an absolute path");
            }
        }
        Some(_) => one_of(map, "pathType", path, &["Exact", "ImplementationSpecific", "Prefix"], causes),
    }
}

/// Where an Ingress sends traffic (kube's `validateIngressBackend`): a Service by name and one port,
/// or a resource, not both.
pub(super) fn ingress_backend(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let set = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    let here = path.render();
    match (set("resource"), map.get("service").filter(|v| !v.is_null())) {
        (true, Some(_)) => invalid(causes, here, "\"\"".into(), "cannot set both resource and service backends"),
        (true, None) => {}
        (false, Some(service)) => {
            let at = path.child("service");
            match service.get("name").and_then(Value::as_str) {
                None | Some("") => required(causes, format!("{at}.name")),
                Some(name) => {
                    dns_label(causes, format!("{at}.name"), name);
                }
            }
            let port = &service["port"];
            let name = port.get("name").and_then(Value::as_str).filter(|n| !n.is_empty());
            let number = port.get("number").and_then(Value::as_i64).filter(|n| *n != 0);
            match (name, number) {
                (Some(_), Some(_)) => invalid(causes, here, "\"\"".into(), "cannot set both port name & port number"),
                (Some(name), None) => {
                    for why in port_name_errors(name) {
                        invalid(causes, format!("{at}.port.name"), format!("{name:?}"), why);
                    }
                }
                (None, Some(n)) if !(1..=65535).contains(&n) => invalid(
                    causes,
                    format!("{at}.port.number"),
                    n.to_string(),
                    "must be between 1 and 65535, inclusive",
                ),
                (None, Some(_)) => {}
                (None, None) => causes.push(cause(
                    "FieldValueRequired",
                    &format!("{at}.port.name"),
                    "Required value: port name or number is required",
                )),
            }
        }
        (false, None) => invalid(causes, here, "\"\"".into(), "resource or service backend is required"),
    }
}
