//! kube's checks of networking.k8s.io/v1's IPAddresses and ServiceCIDRs (kube 1.33's
//! `pkg/apis/networking/validation`), whose IPs and CIDRs kube 1.33 holds to the strict form of new
//! fields (apimachinery's `IsValidIP` and `IsValidCIDR`), not the sloppy one of older fields.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::*;

/// What is wrong with an IP (apimachinery 1.33's `IsValidIP`): one it cannot read, leading zeros
/// (which some software reads as octal), an IPv4-mapped IPv6 address, a form not canonical.
fn ip_error(value: &str) -> Option<String> {
    let Some(ip) = sloppy_ip(value) else {
        return Some("must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)".into());
    };
    match value.parse::<IpAddr>() {
        Err(_) => Some("must not have leading 0s".into()),
        Ok(IpAddr::V6(v6)) if v6.to_ipv4_mapped().is_some() => Some("must not be an IPv4-mapped IPv6 address".into()),
        Ok(_) if ip.to_string() != value => Some(format!("must be in canonical form ({:?})", ip.to_string())),
        Ok(_) => None,
    }
}

/// What is wrong with a CIDR (apimachinery 1.33's `IsValidCIDR`): as `ip_error`, and no bits set
/// past the prefix.
fn cidr_error(value: &str) -> Option<String> {
    let Some((v6, n, prefix)) = cidr(value) else {
        return Some("must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)".into());
    };
    let (ip, bits) = value.split_once('/').unwrap_or_default();
    let strict = ip.parse::<IpAddr>().is_ok() && (bits == "0" || !bits.starts_with('0'));
    let width: u32 = if v6 { 128 } else { 32 };
    let host = width - prefix;
    let network = if host >= 128 { 0 } else { n >> host << host };
    let canonical = if v6 { Ipv6Addr::from(n).to_string() } else { Ipv4Addr::from(n as u32).to_string() };
    if !strict {
        Some("must not have leading 0s in IP or prefix length".into())
    } else if v6 && Ipv6Addr::from(n).to_ipv4_mapped().is_some() {
        Some("must not have an IPv4-mapped IPv6 address".into())
    } else if network != n {
        Some("must not have bits set beyond the prefix length".into())
    } else if format!("{canonical}/{prefix}") != value {
        Some(format!("must be in canonical form (\"{canonical}/{prefix}\")"))
    } else {
        None
    }
}

/// Whether a CIDR is IPv6, as k8s.io/utils' `IPFamilyOfCIDRString` tells (an IPv4-mapped address
/// is IPv4); `None` for no CIDR.
fn is_v6(value: &str) -> Option<bool> {
    cidr(value).map(|(v6, n, _)| v6 && n >> 32 != 0xffff)
}

/// Go's `%#v` of a list of strings.
fn go_string_list(list: &[&str]) -> String {
    let quoted: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// An IPAddress (kube's `ValidateIPAddress`): named by the IP it is (`ValidateIPAddressName`; the
/// name rule kgate's metadata check must leave to this), and the object it is allocated to.
pub(super) fn ip_address(obj: &Value, causes: &mut Vec<Cause>) {
    let name = meta::meta_str(obj, "name").unwrap_or_default();
    // An empty name is kgate's metadata check's to report.
    if let Some(why) = Some(name).filter(|n| !n.is_empty()).and_then(ip_error) {
        invalid(causes, "metadata.name".into(), format!("{name:?}"), &why);
    }
    const AT: &str = "spec.parentRef";
    let Some(parent) = obj["spec"].get("parentRef").filter(|p| !p.is_null()) else {
        return required(causes, AT.into());
    };
    // The core group, a Service's, is "": the group is not required.
    let group = parent["group"].as_str().unwrap_or_default();
    for why in Some(group).filter(|g| !g.is_empty()).map(meta::dns1123_subdomain_errors).unwrap_or_default() {
        invalid(causes, format!("{AT}.group"), format!("{group:?}"), &why);
    }
    for (field, needed) in [("resource", true), ("name", true), ("namespace", false)] {
        match parent[field].as_str().unwrap_or_default() {
            "" if needed => required(causes, format!("{AT}.{field}")),
            "" => {}
            value => {
                if let Err(why) = meta::validate_path_segment(value) {
                    invalid(causes, format!("{AT}.{field}"), format!("{value:?}"), &why);
                }
            }
        }
    }
}

/// What an IPAddress keeps (kube's `ValidateIPAddressUpdate`): the object it is allocated to.
pub(super) fn ip_address_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let parent = |o: &Value| -> Option<[String; 4]> {
        let p = o["spec"].get("parentRef").filter(|p| !p.is_null())?;
        Some(["group", "resource", "namespace", "name"].map(|f| p[f].as_str().unwrap_or_default().to_string()))
    };
    let is = parent(new);
    if parent(old) != is {
        let shown = match is {
            None => "null".to_string(),
            Some([g, r, ns, n]) => {
                format!("networking.ParentReference{{Group:{g:?}, Resource:{r:?}, Namespace:{ns:?}, Name:{n:?}}}")
            }
        };
        invalid(causes, "spec.parentRef".into(), shown, "field is immutable");
    }
}

/// A ServiceCIDR (kube's `ValidateServiceCIDR`): one CIDR, or two of different families.
pub(super) fn service_cidr(obj: &Value, causes: &mut Vec<Cause>) {
    const AT: &str = "spec.cidrs";
    let cidrs: Vec<&str> =
        obj["spec"]["cidrs"].as_array().into_iter().flatten().map(|c| c.as_str().unwrap_or_default()).collect();
    if cidrs.is_empty() {
        return push(causes, cause("FieldValueRequired", AT, "Required value: at least one CIDR required"));
    }
    if cidrs.len() > 2 {
        let shown = format!("networking.ServiceCIDRSpec{{CIDRs:{}}}", go_string_list(&cidrs));
        return invalid(causes, AT.into(), shown, "may only hold up to 2 values");
    }
    for (i, text) in cidrs.iter().enumerate() {
        if let Some(why) = cidr_error(text) {
            invalid(causes, format!("{AT}[{i}]"), format!("{text:?}"), &why);
        }
    }
    if let [a, b] = cidrs[..] {
        if is_v6(a).is_some() && is_v6(a) == is_v6(b) {
            let why = "may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64";
            invalid(causes, AT.into(), go_string_list(&cidrs), why);
        }
    }
}

/// What a ServiceCIDR keeps (kube's `ValidateServiceCIDRUpdate`): its CIDRs, but that a single-stack
/// one may gain a second, of the other family (the new list is checked as a new object's is), so
/// that a cluster can become dual-stack.
pub(super) fn service_cidr_update(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let cidrs = |o: &Value| -> Vec<String> {
        let list = o["spec"]["cidrs"].as_array().into_iter().flatten();
        list.map(|c| c.as_str().unwrap_or_default().to_string()).collect()
    };
    let (was, is) = (cidrs(old), cidrs(new));
    const IMMUTABLE: &str = "field is immutable";
    match (was.len(), is.len()) {
        (a, b) if a == b => {
            for (i, (before, now)) in was.iter().zip(&is).enumerate() {
                if before != now {
                    invalid(causes, format!("spec.cidrs[{i}]"), format!("{now:?}"), IMMUTABLE);
                }
            }
        }
        (1, 2) => {
            if was[0] != is[0] {
                invalid(causes, "spec.cidrs[0]".into(), format!("{:?}", is[0]), IMMUTABLE);
            }
        }
        _ => {
            let shown = if new["spec"]["cidrs"].is_array() {
                go_string_list(&is.iter().map(String::as_str).collect::<Vec<_>>())
            } else {
                "[]string(nil)".to_string()
            };
            invalid(causes, "spec.cidrs".into(), shown, IMMUTABLE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{check, update};
    use super::*;
    use serde_json::json;

    fn named(name: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {"parentRef":
            {"group": "", "resource": "services", "namespace": "default", "name": "kubernetes"}}})
    }

    #[test]
    fn an_ip_address_is_named_by_its_ip_in_canonical_form() {
        for good in ["10.96.0.1", "2001:db8::1", "::1"] {
            assert_eq!(check(ip_address, named(good)), Vec::<String>::new(), "{good}");
        }
        for (bad, why) in [
            ("10.96.0.010", "must not have leading 0s"),
            ("2001:DB8::1", "must be in canonical form (\"2001:db8::1\")"),
            ("2001:db8:0:0:0:0:0:1", "must be in canonical form (\"2001:db8::1\")"),
            ("::ffff:10.0.0.1", "must not be an IPv4-mapped IPv6 address"),
            ("10.0.0.0/24", "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
            ("fe80::1%eth0", "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"),
        ] {
            assert_eq!(check(ip_address, named(bad)), [format!("metadata.name: Invalid value: {bad:?}: {why}")]);
        }
    }

    #[test]
    fn an_ip_address_names_what_holds_it() {
        let subdomain = meta::validate_dns1123_subdomain("A").unwrap_err();
        let bad = json!({"metadata": {"name": "10.0.0.1"}, "spec": {"parentRef":
            {"group": "Bad_Group", "resource": "", "name": "a/b", "namespace": ".."}}});
        assert_eq!(
            check(ip_address, bad),
            [
                format!("spec.parentRef.group: Invalid value: \"Bad_Group\": {subdomain}"),
                "spec.parentRef.resource: Required value".to_string(),
                "spec.parentRef.name: Invalid value: \"a/b\": may not contain '/'".to_string(),
                "spec.parentRef.namespace: Invalid value: \"..\": may not be '..'".to_string(),
            ]
        );
        let orphan = json!({"metadata": {"name": "10.0.0.1"}, "spec": {}});
        assert_eq!(check(ip_address, orphan), ["spec.parentRef: Required value"]);
    }

    #[test]
    fn an_ip_addresses_parent_is_kept() {
        let mut same = named("10.0.0.1");
        same["spec"]["parentRef"].as_object_mut().unwrap().remove("group");
        assert_eq!(update(ip_address_update, named("10.0.0.1"), same), Vec::<String>::new());
        let mut moved = named("10.0.0.1");
        moved["spec"]["parentRef"]["name"] = json!("other");
        assert_eq!(
            update(ip_address_update, named("10.0.0.1"), moved),
            ["spec.parentRef: Invalid value: networking.ParentReference{Group:\"\", Resource:\"services\", Namespace:\"default\", Name:\"other\"}: field is immutable"]
        );
    }

    fn with(cidrs: &[&str]) -> Value {
        json!({"metadata": {"name": "extra"}, "spec": {"cidrs": cidrs}})
    }

    #[test]
    fn service_cidrs() {
        for good in [vec!["10.96.0.0/16", "2001:db8::/112"], vec!["0.0.0.0/0"], vec!["::/0"], vec!["2001:db8::/64"]] {
            assert_eq!(check(service_cidr, with(&good)), Vec::<String>::new(), "{good:?}");
        }
        assert_eq!(
            check(service_cidr, json!({"spec": {}})),
            ["spec.cidrs: Required value: at least one CIDR required"]
        );
        assert_eq!(
            check(service_cidr, with(&["10.0.0.0/24", "10.1.0.0/24", "10.2.0.0/24"])),
            ["spec.cidrs: Invalid value: networking.ServiceCIDRSpec{CIDRs:[]string{\"10.0.0.0/24\", \"10.1.0.0/24\", \"10.2.0.0/24\"}}: may only hold up to 2 values"]
        );
        assert_eq!(
            check(service_cidr, with(&["10.0.0.0/24", "10.1.0.0/24"])),
            ["spec.cidrs: Invalid value: []string{\"10.0.0.0/24\", \"10.1.0.0/24\"}: may specify no more than one IP for each IP family, i.e 192.168.0.0/24 and 2001:db8::/64"]
        );
        assert_eq!(
            check(service_cidr, with(&["10.0.0.1/24", "2001:DB8::/64"])),
            [
                "spec.cidrs[0]: Invalid value: \"10.0.0.1/24\": must not have bits set beyond the prefix length",
                "spec.cidrs[1]: Invalid value: \"2001:DB8::/64\": must be in canonical form (\"2001:db8::/64\")",
            ]
        );
        for (bad, why) in [
            ("010.0.0.0/8", "must not have leading 0s in IP or prefix length"),
            ("10.0.0.0/08", "must not have leading 0s in IP or prefix length"),
            ("::ffff:10.0.0.0/104", "must not have an IPv4-mapped IPv6 address"),
            ("10.0.0.0", "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
            ("10.0.0.0/33", "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)"),
        ] {
            assert_eq!(check(service_cidr, with(&[bad])), [format!("spec.cidrs[0]: Invalid value: {bad:?}: {why}")]);
        }
    }

    #[test]
    fn a_service_cidr_may_only_become_dual_stack() {
        let single = with(&["10.0.0.0/24"]);
        assert_eq!(
            update(service_cidr_update, single.clone(), with(&["10.0.0.0/24", "2001:db8::/64"])),
            Vec::<String>::new()
        );
        assert_eq!(
            update(service_cidr_update, single.clone(), with(&["10.1.0.0/24", "2001:db8::/64"])),
            ["spec.cidrs[0]: Invalid value: \"10.1.0.0/24\": field is immutable"]
        );
        assert_eq!(
            update(service_cidr_update, single.clone(), with(&["10.1.0.0/24"])),
            ["spec.cidrs[0]: Invalid value: \"10.1.0.0/24\": field is immutable"]
        );
        assert_eq!(
            update(service_cidr_update, with(&["10.0.0.0/24", "2001:db8::/64"]), single),
            ["spec.cidrs: Invalid value: []string{\"10.0.0.0/24\"}: field is immutable"]
        );
    }
}
