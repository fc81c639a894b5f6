//! The checks of kinds that describe the cluster itself, as kube makes them: PriorityClasses,
//! IngressClasses, RuntimeClasses, APIServices, Leases and EndpointSlices.

use super::*;

/// The priority classes kube reserves, with their values.
const SYSTEM_PRIORITIES: &[(&str, i64)] =
    &[("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000)];

/// A PriorityClass (kube's `ValidatePriorityClass`): `system-` names only for kube's own classes, a
/// value no user class may pass, a known preemption policy.
pub(super) fn priority_class(obj: &Value, causes: &mut Vec<Cause>) {
    let name = meta::meta_str(obj, "name").unwrap_or_default();
    let value = obj["value"].as_i64().unwrap_or_default();
    if name.starts_with("system-") {
        let problem = match SYSTEM_PRIORITIES.iter().find(|(n, _)| *n == name) {
            None => Some(format!("{name} is not a known system priority class")),
            Some((_, v)) if *v != value => Some(format!("value of {name} PriorityClass must be {v}")),
            Some(_) if obj["globalDefault"] == true => {
                Some(format!("globalDefault of {name} PriorityClass must be false"))
            }
            Some(_) => None,
        };
        if let Some(problem) = problem {
            let why = format!(
                "priority class names with 'system-' prefix are reserved for system use only. error: {problem}"
            );
            forbidden(causes, "metadata.name", &why);
        }
    } else if value > 1_000_000_000 {
        forbidden(causes, "value", "maximum allowed value of a user defined priority is 1000000000");
    }
    if let Some(map) = obj.as_object() {
        one_of_at(map, "preemptionPolicy", "", &["PreemptLowerPriority", "Never"], causes);
    }
}

/// An IngressClass (kube's `ValidateIngressClass`): a controller named by a domain-prefixed path, and
/// parameters that name a resource in the scope they say.
pub(super) fn ingress_class(obj: &Value, causes: &mut Vec<Cause>) {
    let controller = obj["spec"]["controller"].as_str().unwrap_or_default();
    if controller.len() > 250 {
        push(causes, cause("FieldValueTooLong", "spec.controller", "Too long: may not be more than 250 bytes"));
    }
    domain_prefixed_path(controller, "spec.controller", causes);
    let Some(parameters) = obj["spec"].get("parameters").filter(|p| p.is_object()) else { return };
    const AT: &str = "spec.parameters";
    if let Some(group) = parameters["apiGroup"].as_str().filter(|g| !g.is_empty()) {
        for why in meta::dns1123_subdomain_errors(group) {
            invalid(causes, format!("{AT}.apiGroup"), format!("{group:?}"), &why);
        }
    }
    for field in ["kind", "name"] {
        match parameters[field].as_str().unwrap_or_default() {
            "" => push(
                causes,
                cause("FieldValueRequired", &format!("{AT}.{field}"), format!("Required value: {field} is required")),
            ),
            value => {
                if let Err(why) = meta::validate_path_segment(value) {
                    invalid(causes, format!("{AT}.{field}"), format!("{value:?}"), &why);
                }
            }
        }
    }
    let namespace = parameters.get("namespace").filter(|n| !n.is_null()).map(|n| n.as_str().unwrap_or_default());
    match (parameters["scope"].as_str(), namespace) {
        (None, _) => required(causes, format!("{AT}.scope")),
        (Some("Namespace"), None) => push(
            causes,
            cause(
                "FieldValueRequired",
                &format!("{AT}.namespace"),
                "Required value: `parameters.scope` is set to 'Namespace'",
            ),
        ),
        (Some("Namespace"), Some(ns)) => dns_label(causes, format!("{AT}.namespace"), ns),
        (Some("Cluster"), Some(_)) => {
            forbidden(causes, &format!("{AT}.namespace"), "`parameters.scope` is set to 'Cluster'")
        }
        (Some("Cluster"), None) => {}
        (Some(other), _) => {
            not_supported(causes, format!("{AT}.scope"), &Value::String(other.into()), &["Cluster", "Namespace"])
        }
    }
}

/// A path after a domain (kube's `IsDomainPrefixedPath`: `acme.io/foo`).
fn domain_prefixed_path(value: &str, at: &str, causes: &mut Vec<Cause>) {
    if value.is_empty() {
        return required(causes, at.to_string());
    }
    let Some((host, path)) = value.split_once('/').filter(|(h, p)| !h.is_empty() && !p.is_empty()) else {
        return invalid(
            causes,
            at.to_string(),
            format!("{value:?}"),
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        );
    };
    for why in meta::dns1123_subdomain_errors(host) {
        invalid(causes, at.to_string(), format!("{host:?}"), &why);
    }
    if !path.chars().all(|c| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c)) {
        let why = "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')";
        invalid(causes, at.to_string(), format!("{path:?}"), why);
    }
}

/// A RuntimeClass (kube's `ValidateRuntimeClass`): a handler that is a DNS label, an overhead of
/// resources a container may have and none negative.
pub(super) fn runtime_class(obj: &Value, causes: &mut Vec<Cause>) {
    let handler = obj["handler"].as_str().unwrap_or_default();
    dns_label(causes, "handler".into(), handler);
    // kube checks the overhead as a container's limits, and names it so.
    for (name, q) in obj["overhead"]["podFixed"].as_object().into_iter().flatten() {
        let at = format!("overhead.limits[{name}]");
        container_resource_name(name, &at, causes);
        if crate::registry::quantity::compare(q, &Value::String("0".into())).is_some_and(|o| o.is_lt()) {
            invalid(causes, at, shown(q), "must be greater than or equal to 0");
        }
    }
    if let Some(selector) = obj["scheduling"]["nodeSelector"].as_object() {
        meta::label_errors(selector, "scheduling.nodeSelector", causes);
    }
}

/// An APIService (kube-aggregator's `ValidateAPIService`): named `version.group`, priorities in range,
/// a Service to call or none, and TLS either checked or skipped.
pub(super) fn api_service(obj: &Value, causes: &mut Vec<Cause>) {
    let spec = &obj["spec"];
    let (group, version) = (spec["group"].as_str().unwrap_or_default(), spec["version"].as_str().unwrap_or_default());
    let name = meta::meta_str(obj, "name").unwrap_or_default();
    let expected = format!("{version}.{group}");
    if meta::validate_path_segment(name).is_ok() && name != expected {
        let why = format!("must be `spec.version+\".\"+spec.group`: {expected:?}");
        invalid(causes, "metadata.name".into(), format!("{name:?}"), &why);
    }
    if group.is_empty() && version != "v1" {
        let why = "Required value: only v1 may have an empty group and it better be legacy kube";
        push(causes, cause("FieldValueRequired", "spec.group", why));
    } else if !group.is_empty() {
        for why in meta::dns1123_subdomain_errors(group) {
            invalid(causes, "spec.group".into(), format!("{group:?}"), &why);
        }
    }
    for why in meta::dns1035_label_errors(version) {
        invalid(causes, "spec.version".into(), format!("{version:?}"), &why);
    }
    let priority = |field: &str, max: i64| {
        let n = spec[field].as_i64().unwrap_or_default();
        (!(1..=max).contains(&n)).then_some(n)
    };
    if let Some(n) = priority("groupPriorityMinimum", 20000) {
        invalid(causes, "spec.groupPriorityMinimum".into(), n.to_string(), "must be positive and less than 20000");
    }
    if let Some(n) = priority("versionPriority", 1000) {
        invalid(causes, "spec.versionPriority".into(), n.to_string(), "must be positive and less than 1000");
    }
    let ca = spec["caBundle"].as_str().unwrap_or_default();
    let skip_tls = spec["insecureSkipTLSVerify"] == true;
    let Some(service) = spec.get("service").filter(|s| s.is_object()) else {
        if !ca.is_empty() {
            // kube counts the bundle's bytes, decoded.
            let bytes = (ca.len() / 4 * 3).saturating_sub(ca.bytes().rev().take_while(|b| *b == b'=').count());
            let shown = format!("\"{bytes} bytes\"");
            invalid(causes, "spec.caBundle".into(), shown, "local APIServices may not have a caBundle");
        }
        if skip_tls {
            let why = "local APIServices may not have insecureSkipTLSVerify";
            invalid(causes, "spec.insecureSkipTLSVerify".into(), "true".into(), why);
        }
        return;
    };
    for field in ["namespace", "name"] {
        if service[field].as_str().unwrap_or_default().is_empty() {
            required(causes, format!("spec.service.{field}"));
        }
    }
    if let Some(port) = service["port"].as_i64().filter(|p| !(1..=65535).contains(p)) {
        let why = "port is not valid: must be between 1 and 65535, inclusive";
        invalid(causes, "spec.service.port".into(), port.to_string(), why);
    }
    if skip_tls && !ca.is_empty() {
        invalid(causes, "spec.insecureSkipTLSVerify".into(), "true".into(), "may not be true if caBundle is present");
    }
}

/// A Lease (kube's `ValidateLeaseSpec`): a positive duration, transitions not below zero.
pub(super) fn lease(obj: &Value, causes: &mut Vec<Cause>) {
    if let Some(n) = obj["spec"]["leaseDurationSeconds"].as_i64().filter(|n| *n <= 0) {
        invalid(causes, "spec.leaseDurationSeconds".into(), n.to_string(), "must be greater than 0");
    }
    if let Some(n) = obj["spec"]["leaseTransitions"].as_i64().filter(|n| *n < 0) {
        invalid(causes, "spec.leaseTransitions".into(), n.to_string(), "must be greater than or equal to 0");
    }
}

/// An EndpointSlice (kube's `ValidateEndpointSlice`): a known address type, named unique ports of a
/// known protocol, and endpoints with addresses of that type.
pub(super) fn endpoint_slice(obj: &Value, causes: &mut Vec<Cause>) {
    let address_type = obj["addressType"].as_str().unwrap_or_default();
    if let Some(map) = obj.as_object() {
        one_of_at(map, "addressType", "", &["FQDN", "IPv4", "IPv6"], causes);
    }
    let ports = obj["ports"].as_array().map_or(&[][..], Vec::as_slice);
    if ports.len() > 20000 {
        push(
            causes,
            cause("FieldValueTooMany", "ports", format!("Too many: {}: must have at most 20000 items", ports.len())),
        );
    } else {
        let mut names = HashSet::new();
        for (i, p) in ports.iter().enumerate() {
            let name = p["name"].as_str().unwrap_or_default();
            if !name.is_empty() {
                dns_label(causes, format!("ports[{i}].name"), name);
            }
            if !names.insert(name) {
                duplicate(causes, &format!("ports[{i}].name"), name);
            }
            match p.get("protocol").filter(|v| !v.is_null()) {
                None => required(causes, format!("ports[{i}].protocol")),
                Some(proto) if !proto.as_str().is_some_and(|p| PROTOCOLS.contains(&p)) => {
                    not_supported(causes, format!("ports[{i}].protocol"), proto, PROTOCOLS)
                }
                Some(_) => {}
            }
            if let Some(app) = p["appProtocol"].as_str() {
                label_key(causes, &format!("ports[{i}].appProtocol"), app);
            }
        }
    }
    let endpoints = obj["endpoints"].as_array().map_or(&[][..], Vec::as_slice);
    if endpoints.len() > 1000 {
        let why = format!("Too many: {}: must have at most 1000 items", endpoints.len());
        return push(causes, cause("FieldValueTooMany", "endpoints", why));
    }
    for (i, e) in endpoints.iter().enumerate() {
        let at = format!("endpoints[{i}].addresses");
        let addresses = e["addresses"].as_array().map_or(&[][..], Vec::as_slice);
        if addresses.is_empty() {
            push(causes, cause("FieldValueRequired", &at, "Required value: must contain at least 1 address"));
        } else if addresses.len() > 100 {
            let why = format!("Too many: {}: must have at most 100 items", addresses.len());
            push(causes, cause("FieldValueTooMany", &at, why));
        }
        for (j, a) in addresses.iter().take(100).enumerate() {
            endpoint_address(address_type, a.as_str().unwrap_or_default(), &at, j, causes);
        }
        if let Some(node) = e["nodeName"].as_str() {
            for why in meta::dns1123_subdomain_errors(node) {
                invalid(causes, format!("endpoints[{i}].nodeName"), format!("{node:?}"), &why);
            }
        }
        if let Some(host) = e["hostname"].as_str() {
            dns_label(causes, format!("endpoints[{i}].hostname"), host);
        }
    }
}

/// One endpoint address of the slice's type. kube reports an address of the other IP family at the
/// list, without an index.
fn endpoint_address(address_type: &str, address: &str, list: &str, j: usize, causes: &mut Vec<Cause>) {
    let at = format!("{list}[{j}]");
    const NOT_IP: &str = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)";
    let ip = match address_type {
        "IPv4" | "IPv6" => match sloppy_ip(address) {
            None => return invalid(causes, at, format!("{address:?}"), NOT_IP),
            Some(ip) => ip,
        },
        "FQDN" => {
            if address.is_empty() {
                return required(causes, at);
            }
            let name = address.strip_suffix('.').unwrap_or(address);
            if let Err(why) = meta::validate_dns1123_subdomain(name) {
                invalid(causes, at, format!("{address:?}"), &why);
            } else if name.split('.').count() < 2 {
                let why = "should be a domain with at least two segments separated by dots";
                invalid(causes, at, format!("{address:?}"), why);
            }
            return;
        }
        _ => return,
    };
    if address_type == "IPv6" && ip.is_ipv6() && ip.to_string() != address {
        let why = format!("must be in canonical form ({:?})", ip.to_string());
        return invalid(causes, at, format!("{address:?}"), &why);
    }
    if (address_type == "IPv4") != ip.is_ipv4() {
        let why = if address_type == "IPv4" { "must be an IPv4 address" } else { "must be an IPv6 address" };
        return invalid(causes, list.to_string(), format!("{address:?}"), why);
    }
    let (unspecified, loopback, link_local, multicast) = match ip {
        std::net::IpAddr::V4(v4) => {
            (v4.is_unspecified(), v4.is_loopback(), v4.is_link_local(), v4.octets()[..3] == [224, 0, 0])
        }
        std::net::IpAddr::V6(v6) => (
            v6.is_unspecified(),
            v6.is_loopback(),
            v6.segments()[0] & 0xffc0 == 0xfe80,
            v6.segments()[0] & 0xff0f == 0xff02,
        ),
    };
    if unspecified {
        invalid(causes, at.clone(), format!("{address:?}"), &format!("may not be unspecified ({address})"));
    }
    if loopback {
        invalid(causes, at.clone(), format!("{address:?}"), "may not be in the loopback range (127.0.0.0/8, ::1/128)");
    }
    if link_local {
        invalid(
            causes,
            at.clone(),
            format!("{address:?}"),
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        );
    }
    if multicast {
        let why = "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)";
        invalid(causes, at, format!("{address:?}"), why);
    }
}

/// An IP as Go's `netutils.ParseIPSloppy` reads it (IPv4 octets with leading zeros read as decimal).
pub(super) fn sloppy_ip(s: &str) -> Option<std::net::IpAddr> {
    let octets: Vec<&str> = s.split('.').collect();
    let decimal = |o: &&str| !o.is_empty() && o.len() <= 3 && o.bytes().all(|b| b.is_ascii_digit());
    if octets.len() == 4 && octets.iter().all(decimal) {
        let parsed: Option<Vec<u8>> = octets.iter().map(|o| o.parse().ok()).collect();
        let [a, b, c, d] = parsed?[..] else { return None };
        return Some(std::net::IpAddr::V4(std::net::Ipv4Addr::new(a, b, c, d)));
    }
    s.parse::<std::net::Ipv6Addr>().ok().map(std::net::IpAddr::V6)
}
