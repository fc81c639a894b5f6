//! Services' and Ingresses' checks: service types and ports, port names, ingress paths and backends.

use super::*;
use crate::registry::gates::Gate;

pub(super) fn service_spec(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    const TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    one_of(map, "type", path, TYPES, causes);
    // The values a gate turns on are refused while it is off, as kube refuses them.
    let distributions: &[&str] = match crate::registry::gates::enabled(Gate::PreferSameTrafficDistribution) {
        true => &["PreferClose", "PreferSameZone", "PreferSameNode"],
        false => &["PreferClose"],
    };
    match map.get("trafficDistribution") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if distributions.contains(&s.as_str()) => {}
        Some(v) => not_supported(causes, path.child("trafficDistribution"), v, distributions),
    }
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
        None | Some("") => push(
            causes,
            cause("FieldValueRequired", &path.child("pathType"), "Required value: pathType must be specified"),
        ),
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
                (None, None) => push(
                    causes,
                    cause(
                        "FieldValueRequired",
                        &format!("{at}.port.name"),
                        "Required value: port name or number is required",
                    ),
                ),
            }
        }
        (false, None) => invalid(causes, here, "\"\"".into(), "resource or service backend is required"),
    }
}

/// A CIDR as Go's `ParseCIDR` reads it, sloppily as kube's legacy fields do (IPv4 octets with leading
/// zeros read as decimal): whether IPv6, the address as a number, the prefix length.
pub(super) fn cidr(s: &str) -> Option<(bool, u128, u32)> {
    let (ip, prefix) = s.split_once('/')?;
    let prefix_ok = !prefix.is_empty() && prefix.len() <= 3 && prefix.bytes().all(|b| b.is_ascii_digit());
    let prefix: u32 = prefix.parse().ok().filter(|_| prefix_ok)?;
    let v4 = |ip: &str| -> Option<u128> {
        let octets: Vec<&str> = ip.split('.').collect();
        let ok = |o: &&str| !o.is_empty() && o.len() <= 3 && o.bytes().all(|b| b.is_ascii_digit());
        if octets.len() != 4 || !octets.iter().all(ok) {
            return None;
        }
        octets.iter().try_fold(0u128, |n, o| Some(n << 8 | u128::from(o.parse::<u8>().ok()?)))
    };
    match (v4(ip), ip.parse::<std::net::Ipv6Addr>()) {
        (Some(n), _) if prefix <= 32 => Some((false, n, prefix)),
        (None, Ok(v6)) if prefix <= 128 => Some((true, u128::from(v6), prefix)),
        _ => None,
    }
}

/// An address block a NetworkPolicy allows (kube's `ValidateIPBlock`): a CIDR, and exceptions that
/// are strict subsets of it.
pub(super) fn ip_block(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    const NOT_A_CIDR: &str = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)";
    let block = match map.get("cidr").and_then(Value::as_str).unwrap_or_default() {
        "" => return required(causes, path.child("cidr")),
        text => match cidr(text) {
            Some(block) => block,
            None => return invalid(causes, path.child("cidr"), format!("{text:?}"), NOT_A_CIDR),
        },
    };
    let masked = |(v6, n, prefix): (bool, u128, u32)| {
        let bits = if v6 { 128 } else { 32 };
        let host = bits - prefix.min(bits);
        if host >= 128 {
            0
        } else {
            n >> host << host
        }
    };
    let excepts = map.get("except").and_then(Value::as_array);
    for (i, text) in excepts.into_iter().flatten().filter_map(Value::as_str).enumerate() {
        let at = format!("{}[{i}]", path.child("except"));
        let Some(except) = cidr(text) else {
            invalid(causes, at, format!("{text:?}"), NOT_A_CIDR);
            continue;
        };
        // Within the block: the same family, the block's bits of the exception's network its own.
        let within = except.0 == block.0 && masked((block.0, masked(except), block.2)) == masked(block);
        if !within || block.2 >= except.2 {
            invalid(causes, at, format!("{text:?}"), "must be a strict subset of `cidr`");
        }
    }
}

/// A port a NetworkPolicy allows (kube's `ValidateNetworkPolicyPort`): a known protocol; a number, and
/// an end not before it, or a name and no end.
pub(super) fn policy_port(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    if let Some(p) = map.get("protocol").filter(|p| !p.is_null()) {
        if !p.as_str().is_some_and(|p| ["TCP", "UDP", "SCTP"].contains(&p)) {
            not_supported(causes, path.child("protocol"), p, &["TCP", "UDP", "SCTP"]);
        }
    }
    let end = map.get("endPort").and_then(Value::as_i64);
    match map.get("port") {
        Some(Value::Number(n)) => {
            let port = n.as_i64().unwrap_or_default();
            port_number(map, "port", path, false, causes);
            if let Some(end) = end {
                if end < port {
                    invalid(causes, path.child("endPort"), port.to_string(), "must be greater than or equal to `port`");
                }
                port_number(map, "endPort", path, false, causes);
            }
        }
        Some(Value::String(name)) => {
            if let Some(end) = end {
                invalid(
                    causes,
                    path.child("endPort"),
                    end.to_string(),
                    "may not be specified when `port` is non-numeric",
                );
            }
            for why in port_name_errors(name) {
                invalid(causes, path.child("port"), format!("{name:?}"), why);
            }
        }
        _ => {
            if let Some(end) = end {
                invalid(
                    causes,
                    path.child("endPort"),
                    end.to_string(),
                    "may not be specified when `port` is not specified",
                );
            }
        }
    }
}

/// Whom a NetworkPolicy rule allows (kube's `ValidateNetworkPolicyPeer`): pods, namespaces or both,
/// or an address block alone.
pub(super) fn policy_peer(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let set = |f: &str| map.get(f).is_some_and(|v| !v.is_null());
    let peers = ["podSelector", "namespaceSelector", "ipBlock"].into_iter().filter(|f| set(f)).count();
    if peers == 0 {
        push(causes, cause("FieldValueRequired", &path.render(), "Required value: must specify a peer"));
    } else if peers > 1 && set("ipBlock") {
        forbidden(causes, &path.render(), "may not specify both ipBlock and another peer");
    }
}

/// A NetworkPolicy's policy types (kube's `ValidateNetworkPolicySpec`): at most two, each `Ingress`
/// or `Egress`.
pub(super) fn policy_types(map: &Map<String, Value>, path: &Path, causes: &mut Vec<Cause>) {
    let Some(types) = map.get("policyTypes").and_then(Value::as_array) else { return };
    if types.len() > 2 {
        let shown: Vec<String> = types.iter().map(shown).collect();
        let shown = format!("[]networking.PolicyType{{{}}}", shown.join(", "));
        return invalid(causes, path.child("policyTypes"), shown, "may not specify more than two policyTypes");
    }
    for (i, t) in types.iter().enumerate() {
        if !t.as_str().is_some_and(|t| t == "Ingress" || t == "Egress") {
            not_supported(causes, format!("{}[{i}]", path.child("policyTypes")), t, &["Ingress", "Egress"]);
        }
    }
}
