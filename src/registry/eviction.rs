//! A pod's eviction, as kube-apiserver's eviction subresource does it: a pod guarded by a
//! PodDisruptionBudget goes only if its budget allows one more disruption, which the eviction spends
//! (`disruptionsAllowed` down by one, the pod noted in `disruptedPods`) before the pod is marked with a
//! `DisruptionTarget` condition and deleted. Pods that are not running, or already going, are deleted
//! without asking any budget. kgate runs no disruption controller: a budget's status says what its
//! writer (a controller, an operator or a test) last said, and the eviction reads and spends that.

use serde_json::{json, Map, Value};

use super::{Ctx, DeleteOptions, FieldValidation, ListOptions, Registry, WriteOptions};
use crate::meta;
use crate::request::Query;
use crate::selector::object::Selector;
use crate::status::{cause, ApiError, ApiResult};

/// The most pods a budget may hold as disrupted but not yet seen gone by its controller; past it
/// evictions under the budget are refused (kube's `MaxDisruptedPodSize`).
const MAX_DISRUPTED_PODS: usize = 2000;

/// Attempts at a budget's or a pod's read-modify-write before giving up on conflicts.
const ATTEMPTS: usize = 20;

/// The eviction's own writes (the budget's and the pod's status), made as kube-apiserver's loopback
/// client makes them.
fn own_write() -> WriteOptions {
    WriteOptions {
        dry_run: false,
        field_manager: Some("kube-apiserver".into()),
        field_validation: FieldValidation::Ignore,
        force: None,
    }
}

/// What stands between the eviction and the delete.
enum Guard {
    /// Nothing: no budget covers the pod.
    None,
    /// A budget (named) covers the pod but lets it go without spending (the pod is not ready and the
    /// budget can spare it): delete only the pod as it was read.
    Unready(String),
    /// A budget that must allow a disruption, and spend it.
    Budget(Value),
}

impl Registry {
    /// Evict the pod `name` of `ctx` (a pods context): its `Eviction` body's name must match, and its
    /// `deleteOptions` apply to the delete.
    pub async fn evict(&self, ctx: &Ctx<'_>, name: &str, eviction: &Value, opts: &DeleteOptions) -> ApiResult<()> {
        if meta::meta_str(eviction, "name").is_some_and(|n| n != name) {
            return Err(ApiError::bad_request("name in URL does not match name in Eviction object"));
        }
        // As kube: a pod that ignores budgets is read and deleted again when another write comes
        // between (unless the client named the version it meant).
        let retry = opts.resource_version.is_none();
        let mut pod = self.get(ctx, name).await?;
        let mut attempts = 0;
        while can_ignore_budgets(&pod) {
            let mut opts = opts.clone();
            // A pending pod could turn ready in between: delete only the one that was judged.
            if !terminal_or_going(&pod) && retry {
                opts.resource_version = meta::meta_str(&pod, "resourceVersion").map(str::to_string);
            }
            match self.mark_and_delete(ctx, name, &opts).await {
                Err(e) if e.code == 409 && retry && attempts < ATTEMPTS => {
                    attempts += 1;
                    pod = self.get(ctx, name).await?;
                }
                done => return done,
            }
        }
        let mut opts = opts.clone();
        // For an unready pod: its budget's name, and whether the client named a version of its own.
        let unready = match self.guard(ctx, &pod).await? {
            Guard::None => None,
            Guard::Unready(budget) => {
                // kube deletes only the version judged unready, whatever the client named.
                let judged = meta::meta_str(&pod, "resourceVersion").unwrap_or_default().to_string();
                Some((budget, opts.resource_version.replace(judged).is_some()))
            }
            Guard::Budget(pdb) => {
                self.spend(ctx, &pdb, name, opts.dry_run).await?;
                None
            }
        };
        match (self.mark_and_delete(ctx, name, &opts).await, unready) {
            // The unready pod changed since it was judged (it may be ready now) and the client named no
            // version: kube's answer is to try again, as while a budget is being processed.
            (Err(e), Some((budget, false))) if e.code == 409 => Err(budget_refusal(
                Some(10),
                format!("The disruption budget {budget} is still being processed by the server."),
            )),
            (done, _) => done,
        }
    }

    /// The budget covering `pod`, if any, and whether the eviction must spend it.
    async fn guard(&self, ctx: &Ctx<'_>, pod: &Value) -> ApiResult<Guard> {
        let pdbs =
            crate::resources::find("policy", "v1", "poddisruptionbudgets").ok_or_else(ApiError::path_not_found)?;
        let labels: std::collections::BTreeMap<String, String> = meta::metadata(pod)
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect();
        let every = ListOptions::from_query(&Query::default(), false)?;
        let all = self.list(&pdbs, Some(ctx.cluster), ctx.namespace, &every).await?;
        let mut covering = all.items.into_iter().filter(|pdb| {
            // A selector kube cannot parse selects nothing.
            Selector::parse(&pdb["spec"]["selector"]).is_some_and(|s| s.matches(&labels))
        });
        let Some(pdb) = covering.next() else { return Ok(Guard::None) };
        if covering.next().is_some() {
            let mut e = ApiError::internal("");
            e.reason = "";
            e.message =
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
                    .into();
            return Err(e);
        }
        if !is_ready(pod) {
            let status = &pdb["status"];
            let (current, desired) = (int(&status["currentHealthy"]), int(&status["desiredHealthy"]));
            // An unready pod counts for nothing in the budget: it goes without spending when the policy
            // says so, or when the application is healthy without it.
            if pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow" || (current >= desired && desired > 0) {
                return Ok(Guard::Unready(meta::meta_str(&pdb, "name").unwrap_or_default().to_string()));
            }
        }
        Ok(Guard::Budget(pdb))
    }

    /// Spend one disruption of `pdb` on the pod `pod_name`, re-reading the budget on conflicts.
    async fn spend(&self, ctx: &Ctx<'_>, pdb: &Value, pod_name: &str, dry_run: bool) -> ApiResult<()> {
        let def =
            crate::resources::find("policy", "v1", "poddisruptionbudgets").ok_or_else(ApiError::path_not_found)?;
        let pdb_ctx = Ctx { def: &def, admit: None, ..*ctx };
        let name = meta::meta_str(pdb, "name").unwrap_or_default().to_string();
        let mut pdb = pdb.clone();
        for _ in 0..ATTEMPTS {
            let next = check_and_decrement(&pdb, pod_name)?;
            if dry_run {
                return Ok(());
            }
            match self.update(&pdb_ctx, &name, next, &own_write(), Some("status")).await {
                Ok(_) => return Ok(()),
                Err(e) if e.code == 409 => pdb = self.get(&pdb_ctx, &name).await?,
                Err(e) => return Err(e),
            }
        }
        Err(ApiError::timeout(format!("couldn't update PodDisruptionBudget \"{name}\" due to conflicts")))
    }

    /// Mark the pod as a disruption's target and delete it, as kube 1.33 does (PodDisruptionConditions
    /// is on): the condition tells its controllers why it went. The preconditions hold on the pod
    /// before it is marked; the delete then expects the marked version.
    async fn mark_and_delete(&self, ctx: &Ctx<'_>, name: &str, opts: &DeleteOptions) -> ApiResult<()> {
        let mut opts = opts.clone();
        if !opts.dry_run {
            let mut marked = None;
            for _ in 0..ATTEMPTS {
                let mut pod = self.get(ctx, name).await?;
                check_preconditions(&pod, name, &opts)?;
                set_disruption_target(&mut pod);
                match self.update(ctx, name, pod, &own_write(), Some("status")).await {
                    Ok(w) => {
                        marked = Some(w.body);
                        break;
                    }
                    Err(e) if e.code == 409 => continue,
                    Err(e) => return Err(e),
                }
            }
            let marked =
                marked.ok_or_else(|| ApiError::timeout(format!("couldn't mark pod \"{name}\" due to conflicts")))?;
            if opts.resource_version.is_some() {
                opts.resource_version = meta::meta_str(&marked, "resourceVersion").map(str::to_string);
            }
        }
        self.delete(ctx, name, &opts).await.map(|_| ())
    }
}

/// Pods whose eviction disrupts nothing more: finished, not yet running, or already going.
fn can_ignore_budgets(pod: &Value) -> bool {
    pod["status"]["phase"] == "Pending" || terminal_or_going(pod)
}

fn terminal_or_going(pod: &Value) -> bool {
    matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
        || meta::meta_str(pod, "deletionTimestamp").is_some()
}

/// Whether the pod's `Ready` condition is true (kube's `IsPodReady`, its measure of healthy).
fn is_ready(pod: &Value) -> bool {
    conditions(pod).iter().any(|c| c["type"] == "Ready" && c["status"] == "True")
}

fn conditions(v: &Value) -> Vec<Value> {
    v["status"]["conditions"].as_array().cloned().unwrap_or_default()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// The 429 of a budget that allows no disruption now, with kube's cause.
fn budget_refusal(retry_after: Option<u32>, why: String) -> ApiError {
    let mut e = ApiError::too_many_requests("Cannot evict pod as it would violate the pod's disruption budget.");
    e.retry_after = retry_after;
    e.causes.push(cause("DisruptionBudget", "", why));
    e
}

/// `pdb` with one disruption spent on `pod_name`, or why it cannot be (kube's `checkAndDecrement`).
fn check_and_decrement(pdb: &Value, pod_name: &str) -> ApiResult<Value> {
    let name = meta::meta_str(pdb, "name").unwrap_or_default();
    let status = &pdb["status"];
    let generation = meta::metadata(pdb).and_then(|m| m.get("generation")).map(int).unwrap_or(0);
    if int(&status["observedGeneration"]) < generation {
        return Err(budget_refusal(
            Some(10),
            format!("The disruption budget {name} is still being processed by the server."),
        ));
    }
    let allowed = int(&status["disruptionsAllowed"]);
    let forbidden = |why: &str| ApiError::forbidden_object("poddisruptionbudget", "policy", name, why);
    if allowed < 0 {
        return Err(forbidden("pdb disruptions allowed is negative"));
    }
    let disrupted = status["disruptedPods"].as_object().map_or(0, Map::len);
    if disrupted > MAX_DISRUPTED_PODS {
        return Err(forbidden("DisruptedPods map too big - too many evictions not confirmed by PDB controller"));
    }
    if allowed == 0 {
        return Err(budget_refusal(
            None,
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                int(&status["desiredHealthy"]),
                int(&status["currentHealthy"])
            ),
        ));
    }
    let mut next = pdb.clone();
    let status = next["status"].as_object_mut().expect("a budget with disruptions allowed has a status");
    status.insert("disruptionsAllowed".into(), json!(allowed - 1));
    if allowed == 1 {
        // The component-helpers' condition: no more disruptions allowed.
        let observed = status.get("observedGeneration").cloned().unwrap_or(json!(0));
        let condition = json!({"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods",
            "message": "", "observedGeneration": observed});
        set_condition(status, condition);
    }
    let disrupted = status.entry("disruptedPods").or_insert_with(|| json!({}));
    if !disrupted.is_object() {
        *disrupted = json!({});
    }
    disrupted[pod_name] = json!(meta::now_rfc3339());
    Ok(next)
}

/// Set a condition by type, as apimachinery's `SetStatusCondition`: its transition time moves only when
/// its status changes.
fn set_condition(status: &mut Map<String, Value>, mut condition: Value) {
    let now = meta::now_rfc3339();
    let list = status.entry("conditions").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let list = list.as_array_mut().expect("made an array above");
    match list.iter_mut().find(|c| c["type"] == condition["type"]) {
        Some(existing) => {
            let changed = existing["status"] != condition["status"];
            let since = existing["lastTransitionTime"].clone();
            condition["lastTransitionTime"] = if changed || since.is_null() { json!(now) } else { since };
            *existing = condition;
        }
        None => {
            condition["lastTransitionTime"] = json!(now);
            list.push(condition);
        }
    }
}

/// The delete's preconditions, checked on the pod before it is marked, with kube's words.
fn check_preconditions(pod: &Value, name: &str, opts: &DeleteOptions) -> ApiResult<()> {
    let conflict = |why: String| ApiError::conflict("Pod", "", name, &why);
    if let Some(want) = opts.uid.as_deref().filter(|u| !u.is_empty()) {
        let have = meta::meta_str(pod, "uid").unwrap_or_default();
        if want != have {
            return Err(conflict(format!(
                "the UID in the precondition ({want}) does not match the UID in record ({have}). The object might \
                 have been deleted and then recreated"
            )));
        }
    }
    if let Some(want) = opts.resource_version.as_deref().filter(|r| !r.is_empty()) {
        let have = meta::meta_str(pod, "resourceVersion").unwrap_or_default();
        if want != have {
            return Err(conflict(format!(
                "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record \
                 ({have}). The object might have been modified"
            )));
        }
    }
    Ok(())
}

/// The pod condition an eviction leaves (kube's `UpdatePodCondition`: the transition time moves only
/// when the status changes).
fn set_disruption_target(pod: &mut Value) {
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    let status = pod["status"].as_object_mut().expect("made an object above");
    let condition = json!({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting"});
    set_condition(status, condition);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pdb(allowed: i64, generation: i64, observed: i64) -> Value {
        json!({"metadata": {"name": "web", "generation": generation},
            "status": {"disruptionsAllowed": allowed, "observedGeneration": observed, "currentHealthy": 3,
                "desiredHealthy": 2, "expectedPods": 3}})
    }

    #[test]
    fn a_budget_is_spent_one_disruption_at_a_time() {
        let next = check_and_decrement(&pdb(2, 1, 1), "p1").unwrap();
        assert_eq!(next["status"]["disruptionsAllowed"], 1);
        assert!(next["status"]["disruptedPods"]["p1"].is_string());
        assert!(next["status"].get("conditions").is_none());
        let last = check_and_decrement(&next, "p2").unwrap();
        assert_eq!(last["status"]["disruptionsAllowed"], 0);
        assert_eq!(last["status"]["conditions"][0]["reason"], "InsufficientPods");
        let e = check_and_decrement(&last, "p3").unwrap_err();
        assert_eq!((e.code, e.retry_after), (429, None));
        assert_eq!(e.causes[0].message, "The disruption budget web needs 2 healthy pods and has 3 currently");
    }

    #[test]
    fn a_budget_its_controller_has_not_seen_is_not_spent() {
        let e = check_and_decrement(&pdb(5, 2, 1), "p").unwrap_err();
        assert_eq!((e.code, e.retry_after), (429, Some(10)));
        assert_eq!(e.causes[0].reason, "DisruptionBudget");
        let e = check_and_decrement(&pdb(-1, 1, 1), "p").unwrap_err();
        assert_eq!(e.code, 403);
        assert_eq!(e.message, "poddisruptionbudget.policy \"web\" is forbidden: pdb disruptions allowed is negative");
    }

    #[test]
    fn pods_not_running_or_going_ignore_budgets() {
        for (pod, ignores) in [
            (json!({"status": {"phase": "Pending"}}), true),
            (json!({"status": {"phase": "Succeeded"}}), true),
            (json!({"status": {"phase": "Failed"}}), true),
            (json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"phase": "Running"}}), true),
            (json!({"status": {"phase": "Running"}}), false),
            (json!({}), false),
        ] {
            assert_eq!(can_ignore_budgets(&pod), ignores, "{pod}");
        }
    }
}
