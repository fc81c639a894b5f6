//! What kube checks on a write of a built-in object's `status` subresource (its
//! `Validate*StatusUpdate` functions): counters a controller reports that can be neither negative nor
//! more than the whole, terminal conditions that stay, and an issued certificate that is never
//! replaced. Creates drop the status and updates of the object keep the stored one, so this is the
//! only path a status takes.

use serde_json::Value;

use super::{forbidden, invalid};
use crate::status::Cause;

/// kube's `ValidateNonnegativeField` message.
const NEGATIVE: &str = "must be greater than or equal to 0";
/// What a part of the replicas may not exceed.
const OVER_REPLICAS: &str = "cannot be greater than status.replicas";

/// Errors of a status write that turns `old` into `new`, for a kind that has status checks.
pub fn status_errors(kind: &str, old: &Value, new: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let status = &new["status"];
    match kind {
        "Deployment" => {
            let fields = ["observedGeneration", "replicas", "updatedReplicas", "readyReplicas", "availableReplicas"];
            non_negative(status, &fields, &mut causes);
            non_negative(status, &["unavailableReplicas", "collisionCount"], &mut causes);
            parts_of_replicas(status, &["updatedReplicas", "readyReplicas", "availableReplicas"], &mut causes);
            available_within_ready(status, "cannot be greater than readyReplicas", &mut causes);
            not_decremented(old, new, &mut causes);
        }
        "ReplicaSet" | "ReplicationController" => {
            let fields =
                ["replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration"];
            non_negative(status, &fields, &mut causes);
            parts_of_replicas(status, &["fullyLabeledReplicas", "readyReplicas", "availableReplicas"], &mut causes);
            available_within_ready(status, "cannot be greater than readyReplicas", &mut causes);
        }
        "StatefulSet" => {
            let fields = ["replicas", "readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"];
            non_negative(status, &fields, &mut causes);
            non_negative(status, &["observedGeneration", "collisionCount"], &mut causes);
            let parts = ["readyReplicas", "currentReplicas", "updatedReplicas", "availableReplicas"];
            parts_of_replicas(status, &parts, &mut causes);
            available_within_ready(status, "cannot be greater than status.readyReplicas", &mut causes);
            not_decremented(old, new, &mut causes);
        }
        "DaemonSet" => {
            let fields = [
                "currentNumberScheduled",
                "numberMisscheduled",
                "desiredNumberScheduled",
                "numberReady",
                "observedGeneration",
                "updatedNumberScheduled",
                "numberAvailable",
                "numberUnavailable",
                "collisionCount",
            ];
            non_negative(status, &fields, &mut causes);
            not_decremented(old, new, &mut causes);
        }
        "HorizontalPodAutoscaler" => non_negative(status, &["currentReplicas", "desiredReplicas"], &mut causes),
        // policy/v1, the only version 1.33 serves.
        "PodDisruptionBudget" => {
            let fields = ["disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"];
            non_negative(status, &fields, &mut causes);
        }
        "Job" => {
            non_negative(status, &["active", "succeeded", "failed", "ready", "terminating"], &mut causes);
            // Counts of finished pods only grow, but an Indexed Job scaled down with its parallelism
            // equal to its completions may count fewer successes (kube's job strategy).
            let spec = &new["spec"];
            let shrinks = spec["completionMode"] == "Indexed" && spec["completions"] == spec["parallelism"];
            for (field, may_shrink) in [("failed", false), ("succeeded", shrinks)] {
                let (was, is) = (count(&old["status"], field), count(status, field));
                if is < was && !may_shrink {
                    let why = format!("cannot decrease the {field} counter");
                    invalid(&mut causes, format!("status.{field}"), is.to_string(), &why);
                }
            }
            // A finished Job stays finished: its controller and its pods' owners rely on it.
            for kind in ["Failed", "Complete", "FailureTarget"] {
                if condition_true(old, kind) && !condition_true(new, kind) {
                    let why = format!("Invalid value: cannot disable the terminal {kind}=True condition");
                    causes.push(crate::status::cause("FieldValueInvalid", "status.conditions", why));
                }
            }
        }
        "Pod" => pod_status_errors(old, new, &mut causes),
        "CertificateSigningRequest" => {
            // The signer sets the certificate once; a holder of status rights may not swap it.
            let given = |v: &Value| v["status"]["certificate"].as_str().filter(|c| !c.is_empty()).map(str::to_string);
            if given(old).is_some() && given(old) != given(new) {
                forbidden(&mut causes, "status.certificate", "updates may not modify existing certificate content");
            }
        }
        _ => {}
    }
    causes
}

/// kube's `ValidatePodStatusUpdate`, less what a pod's status write cannot reach (its spec is the
/// stored one): a finished container stays finished where the pod does not restart it, a nominated
/// node is a node's name, and pod and host IPs are IPs, one a family.
fn pod_status_errors(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let (status, policy) = (&new["status"], old["spec"]["restartPolicy"].as_str().unwrap_or("Always"));
    // Conditions first, as kube checks them, at kube's path: its `validatePodConditions` is handed the
    // metadata's path, so it reports `metadata.conditions[i].Type`. The kubelet's own types pass as
    // they are; any other is a qualified name, so a condition type stays usable as a key.
    for (i, c) in status["conditions"].as_array().into_iter().flatten().enumerate() {
        let kind = c["type"].as_str().unwrap_or_default();
        if matches!(kind, "PodScheduled" | "Ready" | "Initialized") {
            continue;
        }
        for why in crate::meta::qualified_name_errors(kind) {
            invalid(causes, format!("metadata.conditions[{i}].Type"), crate::meta::go_quote(kind), &why);
        }
    }
    // In kube's order: the nominated node, container states, then IPs. (kube also keeps the QoS class
    // it computed at create; kgate records every new pod as BestEffort, so the class a status write
    // brings is taken, not refused.)
    let nominated = status["nominatedNodeName"].as_str().unwrap_or_default();
    if !nominated.is_empty() && old["status"]["nominatedNodeName"].as_str() != Some(nominated) {
        for why in crate::meta::dns1123_subdomain_errors(nominated) {
            invalid(causes, "status.nominatedNodeName".into(), crate::meta::go_quote(nominated), &why);
        }
    }
    let restartable_init = |name: &str| {
        old["spec"]["initContainers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["name"] == name)
            .is_some_and(|c| c["restartPolicy"] == "Always")
    };
    for (field, policy, sidecars) in [
        ("containerStatuses", policy, false),
        ("initContainerStatuses", policy, true),
        ("ephemeralContainerStatuses", "Never", false),
    ] {
        if policy == "Always" {
            continue;
        }
        // The new statuses by name, so that many containers cost their number, not its square.
        let mut news: std::collections::HashMap<&str, Vec<&Value>> = std::collections::HashMap::new();
        for n in status[field].as_array().into_iter().flatten() {
            news.entry(n["name"].as_str().unwrap_or_default()).or_default().push(n);
        }
        let olds = old["status"][field].as_array().map_or(&[][..], Vec::as_slice);
        for (i, was) in olds.iter().enumerate() {
            let Some(done) = was["state"].get("terminated").filter(|t| t.is_object()) else { continue };
            let name = was["name"].as_str().unwrap_or_default();
            if (policy == "OnFailure" && done["exitCode"].as_i64().unwrap_or(0) != 0)
                || (sidecars && restartable_init(name))
            {
                continue;
            }
            // kube's path counts in the old list, and names each new status of that name left running.
            for is in news.get(name).into_iter().flatten() {
                if !is["state"].get("terminated").is_some_and(Value::is_object) {
                    let at = format!("status.{field}[{i}].state");
                    forbidden(causes, &at, "may not be transitioned to non-terminated state");
                }
            }
        }
    }
    for (field, single) in [("podIPs", "podIP"), ("hostIPs", "hostIP")] {
        ips_errors(&old["status"][field], status, field, single, causes);
    }
}

/// kube's `validatePodIPs` and `validateHostIPs`: each entry an IP (as Go parses one, leading zeros
/// and all, unless the stored status had it already), at most one of each family; and a host's first
/// IP is its `hostIP`.
fn ips_errors(old: &Value, status: &Value, field: &str, single: &str, causes: &mut Vec<Cause>) {
    let ips: Vec<&str> =
        status[field].as_array().into_iter().flatten().map(|e| e["ip"].as_str().unwrap_or_default()).collect();
    if ips.is_empty() {
        return;
    }
    let known: Vec<&str> = old.as_array().into_iter().flatten().filter_map(|e| e["ip"].as_str()).collect();
    if field == "hostIPs" && status[single].as_str().unwrap_or_default() != ips[0] {
        invalid(causes, format!("status.{field}[0].ip"), crate::meta::go_quote(ips[0]), "must be equal to `hostIP`");
    }
    let mut families = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        match go_ip(ip) {
            Some(a) => families.push(a.is_ipv4()),
            None if known.contains(ip) => {}
            None => invalid(
                causes,
                format!("status.{field}[{i}]"),
                crate::meta::go_quote(ip),
                "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)",
            ),
        }
    }
    let dual = ips.len() == 2 && families.len() == 2 && families[0] != families[1];
    if ips.len() > 1 && !dual && families.len() == ips.len() {
        // Go's `%#v` of the list, as kube prints a value that is neither a string nor a number.
        let entries: Vec<String> =
            ips.iter().map(|ip| format!("core.{}{{IP:{}}}", go_type(field), crate::meta::go_quote(ip))).collect();
        let shown = format!("[]core.{}{{{}}}", go_type(field), entries.join(", "));
        invalid(causes, format!("status.{field}"), shown, "may specify no more than one IP for each IP family");
    }
}

/// The Go type of one entry of `podIPs` or `hostIPs`.
fn go_type(field: &str) -> &'static str {
    if field == "podIPs" {
        "PodIP"
    } else {
        "HostIP"
    }
}

/// An IP as Go's `ParseIPSloppy` reads one: IPv4 parts may have leading zeros (read as decimal), and an
/// IPv4-mapped IPv6 address is IPv4.
fn go_ip(s: &str) -> Option<std::net::IpAddr> {
    use std::net::IpAddr;
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        });
    }
    let parts: Vec<&str> = s.split('.').collect();
    let octets: Option<Vec<u8>> = parts
        .iter()
        .map(|p| {
            (!p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit())).then(|| p.parse().ok()).flatten()
        })
        .collect();
    match octets.as_deref() {
        Some([a, b, c, d]) => Some(IpAddr::from([*a, *b, *c, *d])),
        _ => None,
    }
}

/// What kube's conversion of a pod status from v1 makes of its IPs, stored as kube stores them: the
/// single field is authoritative, so `podIPs` (`hostIPs`) becomes it alone when it is set and the
/// list is empty or starts elsewhere.
pub fn normalize_pod_ips(status: &mut Value) {
    if !status.is_object() {
        return;
    }
    for (field, single) in [("podIPs", "podIP"), ("hostIPs", "hostIP")] {
        let Some(one) = status[single].as_str().filter(|s| !s.is_empty()).map(str::to_string) else { continue };
        let first = status[field].as_array().and_then(|l| l.first()).map(|e| e["ip"].clone());
        if first.as_ref().and_then(Value::as_str) != Some(one.as_str()) {
            status[field] = serde_json::json!([{"ip": one}]);
        }
    }
    for (field, single) in [("podIPs", "podIP"), ("hostIPs", "hostIP")] {
        // And back: the single field is the list's first.
        if let Some(first) = status[field].as_array().and_then(|l| l.first()).and_then(|e| e["ip"].as_str()) {
            if status.get(single).and_then(Value::as_str).is_none_or(str::is_empty) {
                let first = first.to_string();
                status[single] = Value::String(first);
            }
        }
    }
}

/// Each of `fields` of `status` that is a negative number.
fn non_negative(status: &Value, fields: &[&str], causes: &mut Vec<Cause>) {
    for f in fields {
        if let Some(n) = status[*f].as_i64().filter(|n| *n < 0) {
            invalid(causes, format!("status.{f}"), n.to_string(), NEGATIVE);
        }
    }
}

fn count(status: &Value, field: &str) -> i64 {
    status[field].as_i64().unwrap_or(0)
}

/// Each of `parts` that counts more than `status.replicas`.
fn parts_of_replicas(status: &Value, parts: &[&str], causes: &mut Vec<Cause>) {
    let replicas = count(status, "replicas");
    for part in parts {
        let n = count(status, part);
        if n > replicas {
            invalid(causes, format!("status.{part}"), n.to_string(), OVER_REPLICAS);
        }
    }
}

fn available_within_ready(status: &Value, why: &str, causes: &mut Vec<Cause>) {
    let available = count(status, "availableReplicas");
    if available > count(status, "readyReplicas") {
        invalid(causes, "status.availableReplicas".into(), available.to_string(), why);
    }
}

/// kube's `IsDecremented` of `status.collisionCount`: a count that went down, or away.
fn not_decremented(old: &Value, new: &Value, causes: &mut Vec<Cause>) {
    let (was, is) = (old["status"]["collisionCount"].as_i64(), new["status"]["collisionCount"].as_i64());
    if let Some(was) = was {
        if is.is_none_or(|is| is < was) {
            invalid(causes, "status.collisionCount".into(), is.unwrap_or(0).to_string(), "cannot be decremented");
        }
    }
}

fn condition_true(obj: &Value, kind: &str) -> bool {
    obj["status"]["conditions"].as_array().into_iter().flatten().any(|c| c["type"] == kind && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(kind: &str, old: Value, new: Value) -> Vec<String> {
        status_errors(kind, &old, &new).into_iter().map(|c| format!("{}: {}", c.field, c.message)).collect()
    }

    /// A controller's own condition type must be a qualified name (it ends up as a key, in
    /// readinessGates and field selectors); the kubelet's types are taken as they are.
    #[test]
    fn pod_condition_types_are_qualified_names_at_kubes_path() {
        let pod = |conditions: Value| json!({"spec": {}, "status": {"conditions": conditions}});
        let ok = json!([{"type": "Ready", "status": "True"}, {"type": "example.com/gate", "status": "False"},
                        {"type": "ContainersReady", "status": "True"}, {"type": "DisruptionTarget", "status": "True"}]);
        assert!(messages("Pod", pod(json!([])), pod(ok)).is_empty());
        let bad = json!([{"type": "PodScheduled", "status": "True"}, {"type": "not a type", "status": "True"}]);
        assert_eq!(
            messages("Pod", pod(json!([])), pod(bad)),
            ["metadata.conditions[1].Type: Invalid value: \"not a type\": name part must consist of alphanumeric \
              characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  \
              or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"]
        );
        let unnamed = messages("Pod", pod(json!([])), pod(json!([{"type": "", "status": "True"}])));
        assert_eq!(
            unnamed.first().map(String::as_str),
            Some("metadata.conditions[0].Type: Invalid value: \"\": name part must be non-empty")
        );
    }

    #[test]
    fn a_finished_container_stays_finished_where_the_pod_does_not_restart_it() {
        let terminated = |code: i64| json!({"terminated": {"exitCode": code}});
        let running = json!({"running": {}});
        let pod = |policy: &str, statuses: Value| {
            json!({"spec": {"restartPolicy": policy, "initContainers": [{"name": "side", "restartPolicy": "Always"}]},
                "status": {"qosClass": "BestEffort", "containerStatuses": statuses.clone(), "initContainerStatuses": statuses}})
        };
        let done = json!([{"name": "a", "state": terminated(0)}, {"name": "b", "state": terminated(1)}, {"name": "side", "state": terminated(0)}]);
        let again = json!([{"name": "b", "state": running}, {"name": "a", "state": running}, {"name": "side", "state": running}]);
        assert_eq!(
            messages("Pod", pod("Never", done.clone()), pod("Never", again.clone())),
            [
                "status.containerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state",
                "status.containerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state",
                "status.containerStatuses[2].state: Forbidden: may not be transitioned to non-terminated state",
                "status.initContainerStatuses[0].state: Forbidden: may not be transitioned to non-terminated state",
                "status.initContainerStatuses[1].state: Forbidden: may not be transitioned to non-terminated state",
            ],
            "a sidecar init container restarts; a regular container of the same name does not"
        );
        // OnFailure restarts the one that failed; Always restarts every one.
        let on_failure = messages("Pod", pod("OnFailure", done.clone()), pod("OnFailure", again.clone()));
        assert_eq!(on_failure.len(), 3, "{on_failure:?}");
        assert!(on_failure[0].starts_with("status.containerStatuses[0]"));
        assert!(messages("Pod", pod("Always", done.clone()), pod("Always", again)).is_empty());
        // Staying finished, or a status gone, is fine.
        assert!(messages("Pod", pod("Never", done.clone()), pod("Never", done)).is_empty());
    }

    #[test]
    fn pod_ips_and_nominated_nodes_are_checked_and_a_qos_class_is_taken() {
        let old = json!({"spec": {}, "status": {"qosClass": "Burstable", "podIPs": [{"ip": "bogus"}]}});
        let with = |status: Value| {
            let mut s = json!({"qosClass": "Burstable"});
            s.as_object_mut().unwrap().extend(status.as_object().unwrap().clone());
            json!({"spec": {}, "status": s})
        };
        let ok = [
            json!({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]}),
            // Go reads leading zeros; an invalid IP the stored status had already is kept.
            json!({"podIPs": [{"ip": "010.000.000.001"}]}),
            json!({"podIPs": [{"ip": "bogus"}]}),
            json!({"hostIP": "10.0.0.2", "hostIPs": [{"ip": "10.0.0.2"}]}),
            json!({"nominatedNodeName": "node-1.example"}),
        ];
        for status in ok {
            assert!(messages("Pod", old.clone(), with(status.clone())).is_empty(), "{status}");
        }
        assert_eq!(
            messages("Pod", old.clone(), with(json!({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "nope"}]}))),
            ["status.podIPs[2]: Invalid value: \"nope\": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"]
        );
        assert_eq!(
            messages("Pod", old.clone(), with(json!({"podIPs": [{"ip": "10.0.0.1"}, {"ip": "::ffff:10.0.0.2"}]}))),
            ["status.podIPs: Invalid value: []core.PodIP{core.PodIP{IP:\"10.0.0.1\"}, core.PodIP{IP:\"::ffff:10.0.0.2\"}}: may specify no more than one IP for each IP family"]
        );
        assert_eq!(
            messages("Pod", old.clone(), with(json!({"hostIP": "10.0.0.9", "hostIPs": [{"ip": "10.0.0.2"}]}))),
            ["status.hostIPs[0].ip: Invalid value: \"10.0.0.2\": must be equal to `hostIP`"]
        );
        // kgate records every new pod as BestEffort: the class a kubelet computes is taken.
        assert!(messages("Pod", old.clone(), json!({"spec": {}, "status": {"qosClass": "Guaranteed"}})).is_empty());
        let nominated = messages("Pod", old, with(json!({"nominatedNodeName": "Node_1"})));
        assert_eq!(nominated.len(), 1);
        assert!(
            nominated[0]
                .starts_with("status.nominatedNodeName: Invalid value: \"Node_1\": a lowercase RFC 1123 subdomain"),
            "{nominated:?}"
        );
    }

    #[test]
    fn a_pods_ip_lists_follow_their_single_fields() {
        let mut status = json!({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.2"}, {"ip": "fd00::2"}], "hostIPs": [{"ip": "10.1.0.1"}]});
        normalize_pod_ips(&mut status);
        assert_eq!(
            status,
            json!({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}], "hostIP": "10.1.0.1", "hostIPs": [{"ip": "10.1.0.1"}]})
        );
        let mut status = json!({"podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}]});
        let same = status.clone();
        normalize_pod_ips(&mut status);
        assert_eq!(status, same);
        let mut not_an_object = json!("x");
        normalize_pod_ips(&mut not_an_object);
    }

    #[test]
    fn replica_counts_are_neither_negative_nor_more_than_the_whole() {
        let old = json!({"status": {"replicas": 3}});
        assert!(messages(
            "Deployment",
            old.clone(),
            json!({"status": {"replicas": 3, "readyReplicas": 3, "availableReplicas": 2}})
        )
        .is_empty());
        assert_eq!(
            messages(
                "Deployment",
                old.clone(),
                json!({"status": {"replicas": -1, "readyReplicas": 2, "availableReplicas": 3}})
            ),
            [
                "status.replicas: Invalid value: -1: must be greater than or equal to 0",
                "status.updatedReplicas: Invalid value: 0: cannot be greater than status.replicas",
                "status.readyReplicas: Invalid value: 2: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than status.replicas",
                "status.availableReplicas: Invalid value: 3: cannot be greater than readyReplicas",
            ]
        );
        assert_eq!(
            messages(
                "StatefulSet",
                old.clone(),
                json!({"status": {"replicas": 2, "readyReplicas": 1, "availableReplicas": 2}})
            ),
            ["status.availableReplicas: Invalid value: 2: cannot be greater than status.readyReplicas"]
        );
        assert_eq!(
            messages("ReplicationController", old, json!({"status": {"replicas": 1, "fullyLabeledReplicas": 2}})),
            ["status.fullyLabeledReplicas: Invalid value: 2: cannot be greater than status.replicas"]
        );
        assert_eq!(
            messages(
                "PodDisruptionBudget",
                json!({}),
                json!({"status": {"disruptionsAllowed": -1, "expectedPods": 1}})
            ),
            ["status.disruptionsAllowed: Invalid value: -1: must be greater than or equal to 0"]
        );
        assert_eq!(
            messages("DaemonSet", json!({}), json!({"status": {"numberReady": -2}})),
            ["status.numberReady: Invalid value: -2: must be greater than or equal to 0"]
        );
    }

    #[test]
    fn a_collision_count_only_grows() {
        let old = json!({"status": {"collisionCount": 2}});
        assert!(messages("DaemonSet", old.clone(), json!({"status": {"collisionCount": 3}})).is_empty());
        assert_eq!(
            messages("StatefulSet", old.clone(), json!({"status": {"collisionCount": 1}})),
            ["status.collisionCount: Invalid value: 1: cannot be decremented"]
        );
        assert_eq!(
            messages("Deployment", old, json!({"status": {}})),
            ["status.collisionCount: Invalid value: 0: cannot be decremented"]
        );
    }

    #[test]
    fn a_finished_job_stays_finished_and_an_issued_certificate_stays() {
        let done = json!({"status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(
            messages("Job", done.clone(), json!({"status": {"succeeded": 1, "conditions": []}})),
            ["status.conditions: Invalid value: cannot disable the terminal Complete=True condition"]
        );
        assert!(messages("Job", done.clone(), done.clone()).is_empty());
        let fewer =
            json!({"status": {"succeeded": 0, "failed": 0, "conditions": [{"type": "Complete", "status": "True"}]}});
        let was =
            json!({"status": {"succeeded": 2, "failed": 1, "conditions": [{"type": "Complete", "status": "True"}]}});
        assert_eq!(
            messages("Job", was.clone(), fewer.clone()),
            [
                "status.failed: Invalid value: 0: cannot decrease the failed counter",
                "status.succeeded: Invalid value: 0: cannot decrease the succeeded counter",
            ]
        );
        let mut indexed = fewer;
        indexed["spec"] = json!({"completionMode": "Indexed", "completions": 2, "parallelism": 2});
        assert_eq!(
            messages("Job", was, indexed),
            ["status.failed: Invalid value: 0: cannot decrease the failed counter"]
        );
        assert_eq!(
            messages("Job", json!({}), json!({"status": {"active": -1}})),
            ["status.active: Invalid value: -1: must be greater than or equal to 0"]
        );
        let issued = json!({"status": {"certificate": "LS0tLS1CRUdJTg=="}});
        assert!(messages("CertificateSigningRequest", json!({"status": {}}), issued.clone()).is_empty());
        assert_eq!(
            messages("CertificateSigningRequest", issued, json!({"status": {"certificate": "b3RoZXI="}})),
            ["status.certificate: Forbidden: updates may not modify existing certificate content"]
        );
    }
}
