//! kube's ResourceQuota for object counts, as its quota admission and quota controller keep it: a
//! create in a namespace is charged to every quota there that limits its resource (`count/<resource>`,
//! `count/<resource>.<group>`, and the older names `pods`, `services`, `configmaps`, `secrets`,
//! `replicationcontrollers`, `resourcequotas`, `persistentvolumeclaims`), refused with kube's words
//! when one would exceed its limit, and released when the object is deleted or the create fails.
//!
//! The charge is a compare-and-swap of the quota's `status.used`, as in kube, so concurrent creates on
//! any replica never pass a limit together. Usage is counted afresh where it could drift: when a quota
//! is written, when a CRD's deletion takes its objects, and every `RESYNC` for every quota, as kube's
//! quota controller resyncs (on the replica that leads the controllers).
//!
//! `pods` counts, as kube's pod evaluator does, only the pods that still hold resources: not those
//! that finished (`Succeeded`, `Failed`) nor those whose deletion's grace has passed, while
//! `count/pods` counts every pod stored. A pod that finishes gives its `pods` count back at once; one
//! whose grace runs out, at the next resync.
//!
//! Not enforced (they need a kubelet's view or are not counts): compute and storage quantities
//! (`cpu`, `memory`, `requests.*`, `limits.*`, `*.storageclass.storage.k8s.io/*`, `ephemeral-storage`),
//! `services.nodeports` and `services.loadbalancers`, and quotas with `scopes` or a `scopeSelector`.

use serde_json::{json, Map, Value};

use super::{Ctx, Registry};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::{keys, KeyValue, RangeRequest, StoreError};

/// Which namespaces hold a ResourceQuota, so that a create in one that holds none (almost every one)
/// costs no store read, as kube's quota admission reads its informer's cache. Fed by a store watch of
/// every cluster's quotas (`follow`); until that has listed them all it knows nothing, and every create
/// reads the store. Its size follows the namespaces with quotas, which the quotas' own storage bounds.
#[derive(Default)]
pub struct QuotaIndex {
    /// Quotas per `cluster/namespace`, for those with at least one. A DashMap: creates on every
    /// cluster read it at once, and the watch changes one entry at a time.
    holding: dashmap::DashMap<String, usize>,
    /// Set once the watch has listed every quota; cleared while it starts over.
    ready: std::sync::atomic::AtomicBool,
}

impl QuotaIndex {
    /// Whether `cluster`/`ns` may hold a quota (`true` when the index does not know yet).
    fn may_hold(&self, cluster: &str, ns: &str) -> bool {
        !self.ready.load(std::sync::atomic::Ordering::Acquire) || self.holding.contains_key(&format!("{cluster}/{ns}"))
    }

    /// The `cluster/namespace` a quota key belongs to.
    fn namespace_of(prefix: &str, key: &str) -> Option<String> {
        let parsed = keys::parse(prefix, key, true)?;
        Some(format!("{}/{}", parsed.cluster, parsed.namespace?))
    }

    /// A quota was just written in `cluster`/`ns` here: known at once, before the watch tells (its
    /// count comes with the watch's event).
    pub(super) fn wrote(&self, cluster: &str, ns: &str) {
        self.holding.entry(format!("{cluster}/{ns}")).or_insert(0);
    }

    /// Starting over: nothing known until `listed`.
    pub(super) fn forget(&self) {
        self.ready.store(false, std::sync::atomic::Ordering::Release);
        self.holding.clear();
    }

    /// Every quota has been counted (`quota_added` since the list began).
    pub(super) fn listed(&self) {
        self.ready.store(true, std::sync::atomic::Ordering::Release);
    }

    /// A quota key appeared (`n` = 1) or went (-1); other keys are not counted.
    pub(super) fn quota_added(&self, quotas: &str, key: &str, n: isize) {
        if let Some(at) = QuotaIndex::namespace_of(quotas, key) {
            self.add(at, n);
        }
    }

    fn add(&self, at: String, n: isize) {
        let mut entry = self.holding.entry(at.clone()).or_insert(0);
        *entry = entry.saturating_add_signed(n);
        let empty = *entry == 0;
        drop(entry);
        if empty {
            self.holding.remove_if(&at, |_, n| *n == 0);
        }
    }
}

/// How often every quota is counted afresh: kube-controller-manager's `--resource-quota-sync-period`.
pub const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);

/// Quotas counted at once by a resync.
const RESYNC_CONCURRENCY: usize = 4;

impl Registry {
    /// Count every quota afresh every `RESYNC`, as kube's quota controller does, so that a count that
    /// drifted (a replica killed between an object's removal and its release, objects written around
    /// admission) comes right. Runs until the task is aborted.
    pub async fn run_quota_resync(self) {
        let this = self.clone();
        crate::leader::on_schedule(self, "quota-resync", RESYNC, move |last| {
            let this = this.clone();
            async move {
                // Not at the very first run: quotas were counted as they were written.
                if last.is_some() {
                    match this.resync_quotas().await {
                        Ok(n) => tracing::debug!(quotas = n, "quotas counted afresh"),
                        Err(e) => tracing::warn!(error = %e, "counting quotas afresh; the next resync retries"),
                    }
                }
                0
            }
        })
        .await
    }

    /// Count every quota of every cluster afresh; how many there are.
    pub async fn resync_quotas(&self) -> ApiResult<usize> {
        use futures::StreamExt;
        let prefix = keys::collection(&self.prefix, "core", "resourcequotas", None, None);
        // Names only, a few dozen bytes per quota, read page by page.
        let mut quotas = Vec::new();
        crate::storage::range_pages::<StoreError>(&*self.store, &prefix, COUNT_PAGE, |kvs| {
            for kv in kvs {
                if let Some(k) = keys::parse(&prefix, &kv.key, true) {
                    quotas.push((
                        k.cluster.to_string(),
                        k.namespace.unwrap_or_default().to_string(),
                        k.name.to_string(),
                    ));
                }
            }
            Ok(())
        })
        .await?;
        let n = quotas.len();
        // Every quota is tried; the first failure is reported once all have been.
        let failed: Vec<ApiError> = futures::stream::iter(quotas)
            .map(|(cluster, ns, name)| async move { self.recount_quota(&cluster, &ns, &name).await.err() })
            .buffer_unordered(RESYNC_CONCURRENCY)
            .filter_map(|e| async move { e })
            .collect()
            .await;
        match failed.into_iter().next() {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }
}

/// What a quota step needs of its request, owned, for a task that outlives the request.
pub(super) struct OwnedCtx {
    cluster: String,
    namespace: Option<String>,
    def: ResourceDef,
    user: crate::auth::Identity,
    user_agent: Option<String>,
}

impl OwnedCtx {
    pub(super) fn of(ctx: &Ctx<'_>) -> OwnedCtx {
        OwnedCtx {
            cluster: ctx.cluster.to_string(),
            namespace: ctx.namespace.map(str::to_string),
            def: ctx.def.clone(),
            user: ctx.user.clone(),
            user_agent: ctx.user_agent.map(str::to_string),
        }
    }

    /// The request's context again (without its admission check, which has run).
    pub(super) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            cluster: &self.cluster,
            def: &self.def,
            namespace: self.namespace.as_deref(),
            user: &self.user,
            user_agent: self.user_agent.as_deref(),
            admit: None,
        }
    }
}

impl Registry {
    /// Whether a create or delete in `ctx` may concern a quota (a namespaced object in a namespace
    /// that may hold one).
    pub(super) fn may_hold_quota(&self, ctx: &Ctx<'_>) -> bool {
        match ctx.namespace.filter(|_| ctx.def.namespaced) {
            Some(ns) => self.quota_index.may_hold(ctx.cluster, ns),
            None => false,
        }
    }
}

/// The older quota names, each counting the core resource of that plural.
const LEGACY: &[&str] = &[
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "configmaps",
    "persistentvolumeclaims",
];

/// Keys read per store round trip when objects are counted: each comes with its value, which may be
/// megabytes (a keys-only range would not; the store interface has none yet).
const COUNT_PAGE: usize = 128;

/// The quota names that count objects of `def`.
fn count_names(def: &ResourceDef) -> Vec<String> {
    if def.group.is_empty() {
        let mut names = vec![format!("count/{}", def.plural)];
        if LEGACY.contains(&def.plural.as_str()) {
            names.push(def.plural.clone());
        }
        names
    } else {
        vec![format!("count/{}.{}", def.plural, def.group)]
    }
}

/// The storage group and plural a count name counts, if it is one.
fn counted(name: &str) -> Option<(String, String)> {
    if LEGACY.contains(&name) {
        return Some(("core".into(), name.into()));
    }
    let rest = name.strip_prefix("count/")?;
    Some(match rest.split_once('.') {
        Some((plural, group)) => (group.into(), plural.into()),
        None => ("core".into(), rest.into()),
    })
}

/// Whether `obj` counts under the quota name `name`: every object under its `count/` names, but a pod
/// under `pods` only while it holds resources (kube's `QuotaV1Pod`).
fn counts_under(name: &str, obj: &Value) -> bool {
    name != "pods" || holds_resources(obj, chrono::Utc::now())
}

/// Whether a pod holds resources at `now`: not finished, and not past its deletion's grace period.
fn holds_resources(pod: &Value, now: chrono::DateTime<chrono::Utc>) -> bool {
    if matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed")) {
        return false;
    }
    let meta = &pod["metadata"];
    let Some(since) = meta["deletionTimestamp"].as_str().and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    else {
        return true;
    };
    let grace = chrono::Duration::seconds(meta["deletionGracePeriodSeconds"].as_i64().unwrap_or(0).clamp(0, 1 << 40));
    now <= since.with_timezone(&chrono::Utc) + grace
}

/// How a change of a quota's count is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Charge {
    /// A create's admission: refused past a limit.
    Admit,
    /// A dry run's: judged as `Admit`, written nowhere.
    DryRun,
    /// What is so (an object gone, or one that counts again): written whatever the limit.
    Counted,
}

/// A quantity as a whole count, rounded up as kube's `Quantity.Value` rounds.
fn count_of(q: &Value) -> Option<i64> {
    let v = super::quantity::value(q)?.ceil();
    (v.abs() < 9.0e18).then_some(v as i64)
}

/// Whether a quota selects objects by scope: kgate enforces none of those.
fn scoped(q: &Value) -> bool {
    q["spec"]["scopes"].as_array().is_some_and(|s| !s.is_empty())
        || q["spec"].get("scopeSelector").is_some_and(|s| !s.is_null())
}

/// A quota's limits on counts, by name.
fn hard_counts(q: &Value) -> Vec<(String, i64)> {
    let Some(hard) = q["spec"]["hard"].as_object() else { return Vec::new() };
    hard.iter().filter(|(k, _)| counted(k).is_some()).filter_map(|(k, v)| Some((k.clone(), count_of(v)?))).collect()
}

impl Registry {
    /// Admission of a create of `name` (a `ctx.def` object in `ctx`'s namespace): charge it to each
    /// quota that limits its resource there, or refuse it (403) naming the first quota it would exceed.
    /// A dry run is checked and charged nowhere. Returns the keys of the quotas charged, to `release`
    /// if the create does not happen.
    pub(super) async fn charge_quota(&self, ctx: &Ctx<'_>, name: &str, dry_run: bool) -> ApiResult<Vec<String>> {
        let Some(ns) = ctx.namespace.filter(|_| ctx.def.namespaced) else { return Ok(Vec::new()) };
        if !self.quota_index.may_hold(ctx.cluster, ns) {
            return Ok(Vec::new());
        }
        let names = count_names(ctx.def);
        let prefix = keys::collection(&self.prefix, "core", "resourcequotas", Some(ctx.cluster), Some(ns));
        let quotas = self.store.range(RangeRequest { prefix, ..Default::default() }).await?.kvs;
        let mut charged = Vec::new();
        for kv in quotas {
            let how = if dry_run { Charge::DryRun } else { Charge::Admit };
            match self.adjust(ctx.cluster, ns, kv, &names, 1, how).await {
                Ok(Some(key)) => charged.push(key),
                Ok(None) => {}
                Err(e) => {
                    self.release(ctx, &charged).await;
                    return Err(match e.code {
                        403 => ApiError::forbidden_object(&ctx.def.plural, &ctx.def.group, name, &e.message),
                        _ => e,
                    });
                }
            }
        }
        Ok(charged)
    }

    /// Give one object of `ctx.def` back to the quotas at `quota_keys` (a create that failed).
    pub(super) async fn release(&self, ctx: &Ctx<'_>, quota_keys: &[String]) {
        let (Some(ns), names) = (ctx.namespace, count_names(ctx.def)) else { return };
        for key in quota_keys {
            let kv = match self.store.get(key).await {
                Ok(Some(kv)) => kv,
                _ => continue,
            };
            if let Err(e) = self.adjust(ctx.cluster, ns, kv, &names, -1, Charge::Counted).await {
                tracing::warn!(error = %e, quota = %key, "giving a failed create back to its quota");
            }
        }
    }

    /// The object `obj` of `ctx.def` was deleted: every quota counting it there counts one less.
    pub(super) async fn released(&self, ctx: &Ctx<'_>, obj: &Value) {
        let names: Vec<String> = count_names(ctx.def).into_iter().filter(|n| counts_under(n, obj)).collect();
        self.give_back(ctx, &names, "releasing a deleted object's quota").await;
    }

    /// `before` became `after` (an update of `ctx.def`): the quotas whose names counted it and count it
    /// no longer (a pod that finished, under `pods`) count one less, and those that count it again (a
    /// finished pod's phase set back) one more, as kube's quota controller counts them: past the limit
    /// if need be, since the object is there.
    pub(super) async fn requalified(&self, ctx: &Ctx<'_>, before: &Value, after: &Value) {
        let (mut down, mut up) = (Vec::new(), Vec::new());
        for name in count_names(ctx.def) {
            match (counts_under(&name, before), counts_under(&name, after)) {
                (true, false) => down.push(name),
                (false, true) => up.push(name),
                _ => {}
            }
        }
        self.recount_by(ctx, &down, -1, "giving back a finished pod's quota").await;
        self.recount_by(ctx, &up, 1, "counting a pod that runs again").await;
    }

    /// One object less under each of `names` for every quota in `ctx`'s namespace.
    async fn give_back(&self, ctx: &Ctx<'_>, names: &[String], doing: &str) {
        self.recount_by(ctx, names, -1, doing).await
    }

    /// `delta` objects more under each of `names` for every quota in `ctx`'s namespace, never refused.
    async fn recount_by(&self, ctx: &Ctx<'_>, names: &[String], delta: i64, doing: &str) {
        let Some(ns) = ctx.namespace.filter(|_| ctx.def.namespaced && !names.is_empty()) else { return };
        if !self.quota_index.may_hold(ctx.cluster, ns) {
            return;
        }
        let prefix = keys::collection(&self.prefix, "core", "resourcequotas", Some(ctx.cluster), Some(ns));
        let Ok(page) = self.store.range(RangeRequest { prefix, ..Default::default() }).await else { return };
        for kv in page.kvs {
            if let Err(e) = self.adjust(ctx.cluster, ns, kv, names, delta, Charge::Counted).await {
                tracing::warn!(error = %e, cluster = ctx.cluster, namespace = ns, "{doing}");
            }
        }
    }

    /// Bring the quota at `kv` (in `cluster`/`ns`) to count `delta` more of the objects `names` count,
    /// retrying on conflicts; as `how` says, refuses (403) a positive delta that would pass a limit.
    /// Returns the quota's key when it was charged.
    async fn adjust(
        &self,
        cluster: &str,
        ns: &str,
        mut kv: KeyValue,
        names: &[String],
        delta: i64,
        how: Charge,
    ) -> ApiResult<Option<String>> {
        for _ in 0..super::write::MAX_RETRIES {
            let Ok(mut quota) = serde_json::from_slice::<Value>(&kv.value) else { return Ok(None) };
            let limits: Vec<(String, i64)> =
                hard_counts(&quota).into_iter().filter(|(k, _)| names.contains(k)).collect();
            if limits.is_empty() || scoped(&quota) {
                return Ok(None);
            }
            let mut used = used_of(&quota);
            // Counted now rather than kept: a later release must not take the object off again.
            let mut fresh = Vec::new();
            for (k, _) in &limits {
                if !used.contains_key(k) {
                    used.insert(k.clone(), self.count(cluster, ns, k).await?);
                    fresh.push(k.clone());
                }
            }
            // The count kept, not a fresh one: creates charged and not yet stored are in it.
            let enforced = matches!(how, Charge::Admit | Charge::DryRun);
            if let Some((k, hard)) = limits.iter().find(|(k, hard)| enforced && delta > 0 && used[k] + delta > *hard) {
                let name = crate::meta::meta_str(&quota, "name").unwrap_or_default();
                return Err(ApiError::forbidden(format!(
                    "exceeded quota: {name}, requested: {k}={delta}, used: {k}={}, limited: {k}={hard}",
                    used[k]
                )));
            }
            if how == Charge::DryRun {
                return Ok(None);
            }
            for (k, _) in &limits {
                // A fresh count already tells what was given back; a create is still to come.
                if delta > 0 || !fresh.contains(k) {
                    let n = used[k];
                    used.insert(k.clone(), (n + delta).max(0));
                }
            }
            set_status(&mut quota, &used);
            match self.store.update(&kv.key, super::encode(&quota), kv.mod_revision).await {
                Ok(_) => return Ok(Some(kv.key)),
                Err(StoreError::Conflict { .. }) => match self.store.get(&kv.key).await? {
                    Some(fresh) => kv = fresh,
                    None => return Ok(None),
                },
                Err(StoreError::NotFound) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict("resourcequotas", "", "", "too many concurrent updates; try again"))
    }

    /// How many objects the count name `name` counts in `cluster`/`ns` now.
    async fn count(&self, cluster: &str, ns: &str, name: &str) -> ApiResult<i64> {
        let Some((group, plural)) = counted(name) else { return Ok(0) };
        let prefix = keys::collection(&self.prefix, &group, &plural, Some(cluster), Some(ns));
        let mut n = 0i64;
        // Only `pods` needs to read what it counts.
        let every = name != "pods";
        crate::storage::range_pages::<StoreError>(&*self.store, &prefix, COUNT_PAGE, |kvs| {
            n += match every {
                true => kvs.len(),
                false => kvs
                    .iter()
                    .filter(|kv| serde_json::from_slice::<Value>(&kv.value).is_ok_and(|p| counts_under(name, &p)))
                    .count(),
            } as i64;
            Ok(())
        })
        .await?;
        Ok(n)
    }

    /// Count afresh every quota of `cluster` that limits the count name `name` (its objects went
    /// without a delete of each: a CRD's deletion).
    pub async fn recount_quotas_counting(&self, cluster: &str, name: &str) -> ApiResult<()> {
        let prefix = keys::collection(&self.prefix, "core", "resourcequotas", Some(cluster), None);
        let mut found = Vec::new();
        crate::storage::range_pages::<StoreError>(&*self.store, &prefix, COUNT_PAGE, |kvs| {
            for kv in kvs {
                let Ok(q) = serde_json::from_slice::<Value>(&kv.value) else { continue };
                if q["spec"]["hard"].get(name).is_some() {
                    let (ns, quota) = (q["metadata"]["namespace"].as_str(), q["metadata"]["name"].as_str());
                    if let (Some(ns), Some(quota)) = (ns, quota) {
                        found.push((ns.to_string(), quota.to_string()));
                    }
                }
            }
            Ok(())
        })
        .await?;
        for (ns, quota) in found {
            self.recount_quota(cluster, &ns, &quota).await?;
        }
        Ok(())
    }

    /// What kube's quota controller does when a quota is written: its `status.hard` from its spec and
    /// its `status.used` counted afresh.
    pub(super) async fn recount_quota(&self, cluster: &str, ns: &str, name: &str) -> ApiResult<()> {
        let key = keys::object(&self.prefix, "core", "resourcequotas", cluster, Some(ns), name);
        for _ in 0..super::write::MAX_RETRIES {
            let Some(kv) = self.store.get(&key).await? else { return Ok(()) };
            let Ok(mut quota) = serde_json::from_slice::<Value>(&kv.value) else { return Ok(()) };
            let mut used = Map::new();
            for (k, _) in hard_counts(&quota) {
                if !scoped(&quota) {
                    used.insert(k.clone(), json!(self.count(cluster, ns, &k).await?.to_string()));
                }
            }
            let before = (quota["status"]["hard"].clone(), quota["status"]["used"].clone());
            quota["status"] = json!({"hard": quota["spec"]["hard"].clone(), "used": used});
            if (&quota["status"]["hard"], &quota["status"]["used"]) == (&before.0, &before.1) {
                return Ok(());
            }
            match self.store.update(&key, super::encode(&quota), kv.mod_revision).await {
                Ok(_) | Err(StoreError::NotFound) => return Ok(()),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
}

/// A quota's `status.used` counts, by name.
fn used_of(q: &Value) -> std::collections::HashMap<String, i64> {
    q["status"]["used"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| counted(k).is_some())
        .filter_map(|(k, v)| Some((k.clone(), count_of(v)?)))
        .collect()
}

/// Write `used` into the quota's status, with `status.hard` from its spec; other used entries stay.
fn set_status(q: &mut Value, used: &std::collections::HashMap<String, i64>) {
    let hard = q["spec"]["hard"].clone();
    if !q.get("status").is_some_and(Value::is_object) {
        q["status"] = json!({});
    }
    q["status"]["hard"] = hard;
    if !q["status"].get("used").is_some_and(Value::is_object) {
        q["status"]["used"] = json!({});
    }
    for (k, n) in used {
        q["status"]["used"][k] = json!(n.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_count_while_they_hold_resources() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:01:00Z").unwrap().with_timezone(&chrono::Utc);
        for (pod, holds) in [
            (json!({"status": {"phase": "Pending"}}), true),
            (json!({"status": {"phase": "Running"}}), true),
            (json!({"status": {"phase": "Succeeded"}}), false),
            (json!({"status": {"phase": "Failed"}}), false),
            (
                json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 90}}),
                true,
            ),
            (
                json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "deletionGracePeriodSeconds": 30}}),
                false,
            ),
            (json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}), false),
        ] {
            assert_eq!(holds_resources(&pod, now), holds, "{pod}");
        }
        let done = json!({"status": {"phase": "Failed"}});
        assert!(counts_under("count/pods", &done) && !counts_under("pods", &done));
    }

    #[test]
    fn count_names_and_quantities_read_as_kube_reads_them() {
        let cms = crate::resources::find("", "v1", "configmaps").unwrap();
        assert_eq!(count_names(&cms), ["count/configmaps", "configmaps"]);
        let deploys = crate::resources::find("apps", "v1", "deployments").unwrap();
        assert_eq!(count_names(&deploys), ["count/deployments.apps"]);
        assert_eq!(counted("count/widgets.example.com"), Some(("example.com".into(), "widgets".into())));
        assert_eq!(counted("secrets"), Some(("core".into(), "secrets".into())));
        assert_eq!(counted("requests.cpu"), None);
        assert_eq!(count_of(&json!("10")), Some(10));
        assert_eq!(count_of(&json!("1k")), Some(1000));
        assert_eq!(count_of(&json!("1500m")), Some(2), "rounded up");
        assert_eq!(count_of(&json!(3)), Some(3));
        assert_eq!(count_of(&json!("ten")), None);
        assert_eq!(count_of(&json!("1e3")), Some(1000));
        assert_eq!(count_of(&json!("2E2")), Some(200));
    }
}
