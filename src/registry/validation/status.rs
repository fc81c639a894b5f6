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
