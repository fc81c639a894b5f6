//! Services: the defaults kube-apiserver gives a Service on every write, the addresses and node ports it
//! allocates on create, and the ones it keeps (and refuses to change) on update.
//!
//! There is no network behind a logical cluster, so an address is only a value that is stable for the
//! object: what clients and tools that diff a Service (kubectl, Helm, Argo CD, Ansible's k8s module)
//! read back from kube must come back the same from kgate, and a `kubectl replace` of a manifest without
//! `clusterIP` must keep the one allocated, as kube's service storage does.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{json, Map, Value};

use super::write::{default_to, object_or_null};
use crate::status::{cause, Cause};

/// The first and last node port kube allocates from (its default `--service-node-port-range`).
const NODE_PORTS: (u16, u16) = (30000, 32767);

/// A string field is unset when absent, null or empty (Go decodes all three as "", which kube's
/// defaulting fills).
fn unset(v: Option<&Value>) -> bool {
    matches!(v, None | Some(Value::Null)) || v.and_then(Value::as_str) == Some("")
}

fn str_of<'a>(spec: &'a Map<String, Value>, field: &str) -> &'a str {
    spec.get(field).and_then(Value::as_str).unwrap_or("")
}

/// Every type but ExternalName has cluster addresses.
fn needs_cluster_ip(spec: &Map<String, Value>) -> bool {
    str_of(spec, "type") != "ExternalName"
}

/// NodePort and LoadBalancer Services may have node ports (an update keeps them).
fn has_node_ports(spec: &Map<String, Value>) -> bool {
    matches!(str_of(spec, "type"), "NodePort" | "LoadBalancer")
}

/// NodePort and LoadBalancer Services are given node ports, unless a LoadBalancer opts out.
fn needs_node_ports(spec: &Map<String, Value>) -> bool {
    match str_of(spec, "type") {
        "NodePort" => true,
        "LoadBalancer" => spec.get("allocateLoadBalancerNodePorts") != Some(&Value::Bool(false)),
        _ => false,
    }
}

/// A port's node port, when it has one (0 asks for one).
fn node_port(p: &Map<String, Value>) -> Option<u64> {
    p.get("nodePort").and_then(Value::as_u64).filter(|&n| n != 0)
}

/// The node ports a Service's ports already have.
fn node_ports_taken(spec: &mut Map<String, Value>) -> HashSet<u64> {
    ports_mut(spec).filter_map(|p| node_port(p)).collect()
}

/// The ports that are objects (others are left for the type check to refuse).
fn ports_mut(spec: &mut Map<String, Value>) -> impl Iterator<Item = &mut Map<String, Value>> {
    spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten().filter_map(Value::as_object_mut)
}

/// kube's `SetDefaults_Service`, applied on every write (kube applies it whenever it decodes one).
pub(super) fn defaults(spec: &mut Map<String, Value>) {
    if unset(spec.get("type")) {
        spec.insert("type".into(), json!("ClusterIP"));
    }
    if unset(spec.get("sessionAffinity")) {
        spec.insert("sessionAffinity".into(), json!("None"));
    }
    match str_of(spec, "sessionAffinity") {
        "None" => {
            spec.remove("sessionAffinityConfig");
        }
        "ClientIP" => {
            let client = object_or_null(spec.entry("sessionAffinityConfig").or_insert(Value::Null))
                .and_then(|config| object_or_null(config.entry("clientIP").or_insert(Value::Null)));
            if let Some(client) = client {
                // Three hours, kube's DefaultClientIPServiceAffinitySeconds.
                default_to(client, "timeoutSeconds", json!(10800));
            }
        }
        _ => {}
    }
    for p in spec.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
        let Some(p) = object_or_null(p) else { continue };
        if unset(p.get("protocol")) {
            p.insert("protocol".into(), json!("TCP"));
        }
        // A port of the wrong type is left for the type check to name, not copied.
        let target_unset = unset(p.get("targetPort")) || p.get("targetPort").and_then(Value::as_u64) == Some(0);
        if let Some(port) = p.get("port").filter(|v| v.is_u64()).cloned().filter(|_| target_unset) {
            p.insert("targetPort".into(), port);
        }
    }
    let kind = str_of(spec, "type").to_string();
    let external_ips = spec.get("externalIPs").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let externally_accessible = kind == "LoadBalancer" || kind == "NodePort" || (kind == "ClusterIP" && external_ips);
    if externally_accessible && unset(spec.get("externalTrafficPolicy")) {
        spec.insert("externalTrafficPolicy".into(), json!("Cluster"));
    }
    if matches!(kind.as_str(), "ClusterIP" | "NodePort" | "LoadBalancer")
        && spec.get("internalTrafficPolicy").is_none_or(Value::is_null)
    {
        spec.insert("internalTrafficPolicy".into(), json!("Cluster"));
    }
    if kind == "LoadBalancer" && spec.get("allocateLoadBalancerNodePorts").is_none_or(Value::is_null) {
        spec.insert("allocateLoadBalancerNodePorts".into(), json!(true));
    }
}

/// What kube's service storage allocates on create: a cluster address and its family fields (unless
/// the Service is an ExternalName), and a node port for each port of a NodePort or LoadBalancer.
pub(super) fn allocate(spec: &mut Map<String, Value>) {
    if needs_cluster_ip(spec) {
        allocate_cluster_ip(spec);
    }
    if needs_node_ports(spec) {
        allocate_node_ports(spec);
    }
}

fn allocate_cluster_ip(spec: &mut Map<String, Value>) {
    let first_of_ips = spec
        .get("clusterIPs")
        .and_then(|v| v.get(0))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string);
    if unset(spec.get("clusterIP")) {
        // No network behind it: an address from the service range, stable for the object.
        let ip =
            first_of_ips.unwrap_or_else(|| format!("10.96.{}.{}", rand::random::<u8>(), rand::random::<u8>().max(1)));
        spec.insert("clusterIP".into(), json!(ip));
    }
    if spec.get("clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        let ip = spec["clusterIP"].clone();
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    // A single-stack IPv4 cluster: headless Services without a selector ask for every family there is.
    let headless_unselected = str_of(spec, "clusterIP") == "None"
        && spec.get("selector").and_then(Value::as_object).is_none_or(Map::is_empty);
    if spec.get("ipFamilyPolicy").is_none_or(Value::is_null) {
        let policy = if headless_unselected { "RequireDualStack" } else { "SingleStack" };
        spec.insert("ipFamilyPolicy".into(), json!(policy));
    }
    if spec.get("ipFamilies").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert("ipFamilies".into(), json!(["IPv4"]));
    }
}

/// Give every port without a node port one from the range, unless the range is used up.
fn allocate_node_ports(spec: &mut Map<String, Value>) {
    let mut taken = node_ports_taken(spec);
    let span = u64::from(NODE_PORTS.1 - NODE_PORTS.0) + 1;
    let in_range = |n: &u64| (u64::from(NODE_PORTS.0)..=u64::from(NODE_PORTS.1)).contains(n);
    let mut free = span - taken.iter().filter(|n| in_range(n)).count() as u64;
    for p in ports_mut(spec) {
        if node_port(p).is_some() {
            continue;
        }
        // Once the range is used up, no search: a hostile Service's thousands of ports would each scan
        // the whole range.
        if free == 0 {
            break;
        }
        // From a random start, the first free one.
        let start = rand::random_range(0..span);
        let found = (0..span).map(|i| u64::from(NODE_PORTS.0) + (start + i) % span).find(|n| !taken.contains(n));
        let Some(n) = found else { continue };
        taken.insert(n);
        free -= 1;
        p.insert("nodePort".into(), json!(n));
    }
}

/// kube's `patchAllocatedValues` for node ports: a port left without one gets the old port of the same
/// name's, unless the new object uses that one elsewhere.
fn keep_node_ports(spec: &mut Map<String, Value>, old: &Map<String, Value>) {
    // The old node ports by port name, each taken at most once: linear however many ports either has.
    let name = |p: &Map<String, Value>| p.get("name").map(Value::to_string);
    let mut old_ports: HashMap<Option<String>, VecDeque<u64>> = HashMap::new();
    for p in old.get("ports").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_object) {
        if let Some(n) = node_port(p) {
            old_ports.entry(name(p)).or_default().push_back(n);
        }
    }
    let mut used = node_ports_taken(spec);
    for p in ports_mut(spec) {
        if node_port(p).is_some() {
            continue;
        }
        let Some(candidates) = old_ports.get_mut(&name(p)) else { continue };
        // One the new object already uses stays used: dropping it here loses nothing.
        while let Some(n) = candidates.pop_front() {
            if used.insert(n) {
                p.insert("nodePort".into(), json!(n));
                break;
            }
        }
    }
}

fn node_ports(spec: &Map<String, Value>) -> Vec<Option<&Value>> {
    spec.get("ports").and_then(Value::as_array).into_iter().flatten().map(|p| p.get("nodePort")).collect()
}

/// Drop the node ports a Service no longer has a use for (kube clears them when the type changes).
fn drop_node_ports(spec: &mut Map<String, Value>) {
    for p in ports_mut(spec) {
        p.remove("nodePort");
    }
}

/// kube's update rules: what was allocated is kept when the new object leaves it out, a cluster
/// address may not change, and what the new type has no use for is dropped (or allocated when it
/// now needs it). Returns the causes of a 422.
pub(super) fn update(old: &Value, new: &mut Value) -> Vec<Cause> {
    let Some(old) = old.get("spec").and_then(Value::as_object) else { return Vec::new() };
    let Some(spec) = new.get_mut("spec").and_then(Value::as_object_mut) else { return Vec::new() };
    match (needs_cluster_ip(old), needs_cluster_ip(spec)) {
        (true, true) => {
            if unset(spec.get("clusterIP")) {
                if let Some(ip) = old.get("clusterIP") {
                    spec.insert("clusterIP".into(), ip.clone());
                }
            }
            let old_ips = old.get("clusterIPs").and_then(Value::as_array);
            let ips_unset = spec.get("clusterIPs").and_then(Value::as_array).is_none_or(Vec::is_empty);
            if ips_unset && old_ips.and_then(|a| a.first()) == spec.get("clusterIP") {
                if let Some(ips) = old.get("clusterIPs") {
                    spec.insert("clusterIPs".into(), ips.clone());
                }
            }
            // A client that changed only the singular address means the list to follow it (and is
            // refused below).
            if spec.get("clusterIP") != old.get("clusterIP") && spec.get("clusterIPs") == old.get("clusterIPs") {
                let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
                spec.insert("clusterIPs".into(), json!([ip]));
            }
            for field in ["ipFamilies", "ipFamilyPolicy"] {
                let new_unset = spec.get(field).is_none_or(|v| v.is_null() || v.as_array().is_some_and(Vec::is_empty));
                if let (true, Some(v)) = (new_unset, old.get(field)) {
                    spec.insert(field.into(), v.clone());
                }
            }
            allocate_cluster_ip(spec);
            let first = |s: &Map<String, Value>| s.get("clusterIPs").and_then(|v| v.get(0)).cloned();
            if old_ips.is_some() && first(old) != first(spec) {
                let ips = spec.get("clusterIPs").map(Value::to_string).unwrap_or_default();
                return vec![cause(
                    "FieldValueInvalid",
                    "spec.clusterIPs[0]",
                    format!("Invalid value: {ips}: may not change once set"),
                )];
            }
        }
        (true, false) => {
            // Becoming an ExternalName: the addresses go, unless the client set others (which kube
            // then refuses; here they are kept for the client to see).
            for field in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
                if spec.get(field).is_none_or(|v| v.is_null() || Some(v) == old.get(field)) {
                    spec.remove(field);
                }
            }
        }
        (false, true) => allocate_cluster_ip(spec),
        (false, false) => {}
    }
    // kube's `dropTypeDependentFields`: what the new type has no use for goes, when the client left it
    // as it was.
    if has_node_ports(old) && has_node_ports(spec) {
        keep_node_ports(spec, old);
    } else if has_node_ports(old) && node_ports(spec) == node_ports(old) {
        drop_node_ports(spec);
    }
    if needs_node_ports(spec) {
        allocate_node_ports(spec);
    }
    let unchanged = |spec: &Map<String, Value>, field: &str| spec.get(field) == old.get(field);
    if !has_node_ports(spec) && unchanged(spec, "externalTrafficPolicy") {
        let external_ips = spec.get("externalIPs").and_then(Value::as_array).is_some_and(|a| !a.is_empty());
        if !(str_of(spec, "type") == "ClusterIP" && external_ips) {
            spec.remove("externalTrafficPolicy");
        }
    }
    if str_of(spec, "type") != "LoadBalancer" && unchanged(spec, "allocateLoadBalancerNodePorts") {
        spec.remove("allocateLoadBalancerNodePorts");
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn defaults_fill_unset_fields_as_kube_does() {
        let mut s = spec(json!({"type": "", "sessionAffinity": null,
            "ports": [null, {"port": 80, "protocol": "", "targetPort": 0}, {"port": 81, "targetPort": ""},
                      {"port": 82, "targetPort": "http"}, {"port": "x"}, 7]}));
        defaults(&mut s);
        assert_eq!(s["type"], "ClusterIP");
        assert_eq!(s["sessionAffinity"], "None");
        assert_eq!(s["internalTrafficPolicy"], "Cluster");
        assert!(s.get("externalTrafficPolicy").is_none(), "only externally accessible Services get one");
        assert_eq!(
            s["ports"],
            json!([{"protocol": "TCP"}, {"port": 80, "protocol": "TCP", "targetPort": 80},
                   {"port": 81, "protocol": "TCP", "targetPort": 81}, {"port": 82, "protocol": "TCP", "targetPort": "http"},
                   {"port": "x", "protocol": "TCP"}, 7])
        );

        let mut lb =
            spec(json!({"type": "LoadBalancer", "sessionAffinity": "ClientIP", "sessionAffinityConfig": null}));
        defaults(&mut lb);
        assert_eq!(lb["externalTrafficPolicy"], "Cluster");
        assert_eq!(lb["allocateLoadBalancerNodePorts"], true);
        assert_eq!(lb["sessionAffinityConfig"], json!({"clientIP": {"timeoutSeconds": 10800}}));

        let mut none =
            spec(json!({"sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 5}}, "externalIPs": ["1.2.3.4"]}));
        defaults(&mut none);
        assert!(none.get("sessionAffinityConfig").is_none(), "dropped with sessionAffinity None");
        assert_eq!(none["externalTrafficPolicy"], "Cluster", "a ClusterIP with external IPs is reachable from outside");

        let mut external = spec(json!({"type": "ExternalName", "externalName": "db.example.com"}));
        defaults(&mut external);
        assert!(external.get("internalTrafficPolicy").is_none());
    }

    #[test]
    fn create_allocates_addresses_families_and_distinct_node_ports() {
        let mut s = spec(
            json!({"type": "NodePort", "ports": [{"port": 80}, {"port": 81, "nodePort": 31000}, {"port": 82, "nodePort": 0}]}),
        );
        allocate(&mut s);
        let ip = s["clusterIP"].as_str().unwrap().to_string();
        assert!(ip.starts_with("10.96."), "{ip}");
        assert_eq!(s["clusterIPs"], json!([ip]));
        assert_eq!((&s["ipFamilyPolicy"], &s["ipFamilies"]), (&json!("SingleStack"), &json!(["IPv4"])));
        let ports: Vec<u64> = s["ports"].as_array().unwrap().iter().map(|p| p["nodePort"].as_u64().unwrap()).collect();
        assert_eq!(ports[1], 31000, "a chosen node port is kept");
        assert!(ports.iter().all(|p| (30000..=32767).contains(p)), "{ports:?}");
        assert!(ports[0] != ports[1] && ports[0] != ports[2] && ports[1] != ports[2], "{ports:?}");

        // More ports than the range holds: every node port is distinct, and the rest go without.
        let many: Vec<Value> = (0..3000).map(|i| json!({"port": i + 1})).collect();
        let mut crowded = spec(json!({"type": "NodePort", "ports": many}));
        allocate(&mut crowded);
        let given: std::collections::HashSet<u64> =
            crowded["ports"].as_array().unwrap().iter().filter_map(|p| p["nodePort"].as_u64()).collect();
        assert_eq!(given.len(), 2768);

        let mut headless = spec(json!({"clusterIP": "None"}));
        allocate(&mut headless);
        assert_eq!(headless["clusterIPs"], json!(["None"]));
        assert_eq!(headless["ipFamilyPolicy"], "RequireDualStack");
        let mut chosen = spec(json!({"clusterIPs": ["10.96.7.7"]}));
        allocate(&mut chosen);
        assert_eq!(chosen["clusterIP"], "10.96.7.7");
        let mut external = spec(json!({"type": "ExternalName"}));
        allocate(&mut external);
        assert_eq!(external, spec(json!({"type": "ExternalName"})));
    }

    #[test]
    fn update_keeps_what_was_allocated_and_refuses_a_new_address() {
        let mut old = spec(json!({"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}]}));
        allocate(&mut old);
        let old = json!({"spec": old});
        // A replace without the allocated fields gets them back.
        let mut new = json!({"spec": {"type": "NodePort", "ports": [{"port": 80, "protocol": "TCP"}, {"port": 90, "protocol": "TCP"}]}});
        assert!(update(&old, &mut new).is_empty());
        for f in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            assert_eq!(new["spec"][f], old["spec"][f], "{f}");
        }
        assert_eq!(new["spec"]["ports"][0]["nodePort"], old["spec"]["ports"][0]["nodePort"]);
        assert!(new["spec"]["ports"][1]["nodePort"].is_u64(), "a new port gets a node port");
        // A different address is refused, as kube refuses it, even when only the singular field (as a
        // merge patch of it leaves the old list) changed.
        let mut moved = old.clone();
        moved["spec"]["clusterIP"] = json!("10.1.2.3");
        let causes = update(&old, &mut moved);
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].field, "spec.clusterIPs[0]");
        assert!(causes[0].message.ends_with(r#"["10.1.2.3"]: may not change once set"#), "{}", causes[0].message);
        // To ExternalName: the addresses and node ports go; and back: new ones come.
        let mut external = old.clone();
        external["spec"]["type"] = json!("ExternalName");
        assert!(update(&old, &mut external).is_empty());
        assert!(external["spec"].get("clusterIP").is_none() && external["spec"].get("ipFamilies").is_none());
        assert!(external["spec"]["ports"][0].get("nodePort").is_none());
        let mut back = json!({"spec": {"type": "ClusterIP"}});
        assert!(update(&external, &mut back).is_empty());
        assert!(back["spec"]["clusterIP"].is_string());
        // A renumbered port keeps its node port by name; a LoadBalancer that becomes a ClusterIP loses
        // what only it had.
        let mut lb = spec(json!({"type": "LoadBalancer", "ports": [{"name": "web", "port": 80}]}));
        defaults(&mut lb);
        allocate(&mut lb);
        let lb = json!({"spec": lb});
        let mut renumbered = lb.clone();
        renumbered["spec"]["ports"] = json!([{"name": "web", "port": 8080}]);
        assert!(update(&lb, &mut renumbered).is_empty());
        assert_eq!(renumbered["spec"]["ports"][0]["nodePort"], lb["spec"]["ports"][0]["nodePort"]);
        // Of two old ports of one name, a new port gets the one the new object does not use already.
        let twins = json!({"spec": {"type": "NodePort", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"],
            "ports": [{"name": "a", "port": 1, "nodePort": 30001}, {"name": "a", "port": 2, "nodePort": 30002}]}});
        let mut kept = json!({"spec": {"type": "NodePort", "ports": [{"name": "a", "port": 1, "nodePort": 30001}, {"name": "a", "port": 2}]}});
        assert!(update(&twins, &mut kept).is_empty());
        assert_eq!(kept["spec"]["ports"][1]["nodePort"], 30002);
        let mut inside = lb.clone();
        inside["spec"]["type"] = json!("ClusterIP");
        assert!(update(&lb, &mut inside).is_empty());
        for gone in ["externalTrafficPolicy", "allocateLoadBalancerNodePorts"] {
            assert!(inside["spec"].get(gone).is_none(), "{gone}");
        }
        assert!(inside["spec"]["ports"][0].get("nodePort").is_none());
        assert_eq!(inside["spec"]["clusterIP"], lb["spec"]["clusterIP"]);
        // Objects of the wrong shape are left for the type check.
        let mut odd = json!({"spec": 5});
        assert!(update(&old, &mut odd).is_empty());
        assert_eq!(odd, json!({"spec": 5}));
    }
}
