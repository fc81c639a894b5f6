//! One set of controllers per fleet: replicas elect a leader through a `coordination.k8s.io/v1` Lease
//! in root's `kube-system` (`kgate-controllers`), as kube-controller-manager's replicas do, and only
//! the leader runs the singleton work (logical-cluster purges, bootstraps and RBAC reconciliation,
//! resumed namespace deletions, usage status, compaction). N replicas then do that work once, not N
//! times, and no purge runs twice at once.
//!
//! The rules are client-go's leaderelection: a holder renews every `RETRY`; another replica takes the
//! lease only once it has seen it unchanged for `LEASE_DURATION` by its own clock (never by the
//! holder's timestamps, so clocks need not agree); a leader that cannot renew for `RENEW_DEADLINE`
//! (shorter than the lease) stops its work before anyone may take over. Every write is a
//! compare-and-swap on the Lease's revision. A replica that stops cleanly gives the lease up, so the
//! next takes over at once.

use std::future::Future;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::sync::watch;

use crate::cluster::ROOT;
use crate::registry::Registry;
use crate::storage::{keys, StoreError};

/// The Lease's namespace and name.
pub const LEASE_NAMESPACE: &str = "kube-system";
/// The Lease's name.
pub const LEASE_NAME: &str = "kgate-controllers";

/// How long a lease unchanged is held before another replica may take it.
const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long a leader that cannot renew keeps leading.
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the lease is renewed or tried.
const RETRY: Duration = Duration::from_secs(2);

/// Who this replica is in the Lease: its host, its listen port and a random part, so that an operator
/// reading `holderIdentity` can tell the replica, and two processes never share one.
pub fn identity(port: u16) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let id = uuid::Uuid::new_v4().simple().to_string();
    format!("{}:{port}_{}", if host.is_empty() { "kgate" } else { &host }, &id[..8])
}

/// Run the election until `shutdown`; the receiver it returns says whether this replica leads now.
/// On shutdown the lease is given up if held.
pub fn start(
    registry: Registry,
    identity: String,
    shutdown: watch::Receiver<bool>,
) -> (watch::Receiver<bool>, tokio::task::JoinHandle<()>) {
    let (tx, rx) = watch::channel(false);
    let elector = Elector { registry, identity, observed: None };
    (rx, tokio::spawn(elector.run(tx, shutdown)))
}

/// Run `task` whenever this replica leads, stopping it when it no longer does; ends when the election
/// does. A stopped task is aborted at its next await: the singleton work is written so that each store
/// write stands alone and the next leader resumes it.
pub async fn while_leading<F, Fut>(mut leading: watch::Receiver<bool>, mut task: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        if leading.wait_for(|l| *l).await.is_err() {
            return;
        }
        let running = tokio::spawn(task());
        let lost = leading.wait_for(|l| !*l).await.is_err();
        running.abort();
        let _ = running.await;
        if lost {
            return;
        }
    }
}

/// Run `job` every `every` while this task runs (under `while_leading`: while this replica leads), on
/// a schedule kept in the store under `{prefix}/kgate/schedules/{name}`: when the job last ran,
/// by any replica, and the number it noted then. A new leader goes on with the schedule, running the
/// job when it falls due, rather than starting it over: leadership that changed more often than
/// `every` would otherwise never let the job run (compaction never, history growing without end).
///
/// `job` gets the note of the last run (`None` the very first time) and returns the next note; a
/// compare-and-swap of the schedule makes one run per due time, whoever leads.
pub async fn on_schedule<F, Fut>(registry: Registry, name: &str, every: Duration, mut job: F)
where
    F: FnMut(Option<i64>) -> Fut,
    Fut: Future<Output = i64>,
{
    let key = format!("{}/kgate/schedules/{name}", registry.prefix);
    let store = registry.store.clone();
    loop {
        let marker = match store.get(&key).await {
            Ok(m) => m,
            Err(e) => {
                tracing::debug!(error = %e, schedule = name, "reading a schedule");
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let last: Option<(i64, i64)> = marker.as_ref().and_then(|kv| {
            let v: Value = serde_json::from_slice(&kv.value).ok()?;
            Some((v["at"].as_i64()?, v["note"].as_i64()?))
        });
        if let Some((at, _)) = last {
            // Wall clocks of replicas agree well enough for a schedule of minutes.
            let due = at.saturating_add(i64::try_from(every.as_millis()).unwrap_or(i64::MAX));
            let wait = due.saturating_sub(chrono::Utc::now().timestamp_millis());
            if wait > 0 {
                tokio::time::sleep(Duration::from_millis(wait.unsigned_abs()).min(every)).await;
                continue;
            }
        }
        let note = job(last.map(|(_, note)| note)).await;
        let next = json!({"at": chrono::Utc::now().timestamp_millis(), "note": note}).to_string().into_bytes();
        let written = match &marker {
            Some(kv) => store.update(&key, next, kv.mod_revision).await,
            None => store.create(&key, next).await,
        };
        if let Err(e) = written {
            // Another leader ran it meanwhile (a conflict), or the store is out of reach: read again.
            tracing::debug!(error = %e, schedule = name, "recording a schedule's run");
            tokio::time::sleep(RETRY).await;
        }
    }
}

struct Elector {
    registry: Registry,
    identity: String,
    /// The lease as last read (its revision) and when this replica first saw it so.
    observed: Option<(i64, Instant)>,
}

impl Elector {
    fn key(&self) -> String {
        let def = crate::resources::find("coordination.k8s.io", "v1", "leases").expect("leases are built in");
        keys::object(&self.registry.prefix, def.storage_group(), &def.plural, ROOT, Some(LEASE_NAMESPACE), LEASE_NAME)
    }

    async fn run(mut self, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut renewed = Instant::now();
        loop {
            // An attempt is cut off at the leader's renew deadline, as client-go's renew context is:
            // a store call that hangs must not keep this replica leading past the moment another may
            // take the lease. A renewal counts from when it was sent, which is what others go by.
            let attempt = Instant::now();
            let budget = match *leading.borrow() {
                true => RENEW_DEADLINE.saturating_sub(attempt.duration_since(renewed)),
                false => RENEW_DEADLINE,
            };
            let outcome = match tokio::time::timeout(budget, self.try_acquire_or_renew()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(StoreError::Unavailable("renewing the lease took too long".into())),
            };
            let lead = match outcome {
                Ok(held) => {
                    if held {
                        renewed = attempt;
                    }
                    held
                }
                // The store is out of reach: a leader keeps leading until its deadline, no longer.
                Err(e) => {
                    tracing::debug!(error = %e, "renewing the controllers' lease");
                    *leading.borrow() && Instant::now().duration_since(renewed) < RENEW_DEADLINE
                }
            };
            if lead != *leading.borrow() {
                tracing::info!(identity = %self.identity, leading = lead, "controllers' lease");
                leading.send_replace(lead);
            }
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
        let led = leading.send_replace(false);
        if led {
            if let Err(e) = self.release().await {
                tracing::warn!(error = %e, "giving up the controllers' lease; another replica takes it when it expires");
            }
        }
    }

    /// Take the lease or renew it: true when this replica holds it after the call.
    async fn try_acquire_or_renew(&mut self) -> Result<bool, StoreError> {
        let key = self.key();
        let store = &self.registry.store;
        let now = micro_time();
        let Some(kv) = store.get(&key).await? else {
            let lease = self.lease(None, &now);
            return match store.create(&key, crate::registry::encode(&lease)).await {
                Ok(_) => Ok(true),
                Err(StoreError::AlreadyExists) => Ok(false),
                Err(e) => Err(e),
            };
        };
        let current: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
        let holder = current["spec"]["holderIdentity"].as_str().unwrap_or_default();
        let seen = match self.observed {
            Some((rev, at)) if rev == kv.mod_revision => at,
            _ => {
                self.observed = Some((kv.mod_revision, Instant::now()));
                Instant::now()
            }
        };
        if !holder.is_empty() && holder != self.identity && seen.elapsed() < LEASE_DURATION {
            return Ok(false);
        }
        let lease = self.lease(Some(&current), &now);
        match store.update(&key, crate::registry::encode(&lease), kv.mod_revision).await {
            Ok(rev) => {
                self.observed = Some((rev, Instant::now()));
                Ok(true)
            }
            Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// The Lease held by this replica from now, after `current` (none: a new Lease).
    fn lease(&self, current: Option<&Value>, now: &str) -> Value {
        let mut lease = current.cloned().unwrap_or_else(|| {
            json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                   "metadata": {"name": LEASE_NAME, "namespace": LEASE_NAMESPACE, "uid": uuid::Uuid::new_v4().to_string(),
                                "creationTimestamp": crate::meta::now_rfc3339()},
                   "spec": {"leaseTransitions": 0}})
        });
        if !lease["spec"].is_object() {
            lease["spec"] = json!({});
        }
        let spec = &mut lease["spec"];
        if spec["holderIdentity"].as_str() != Some(&self.identity) {
            if current.is_some() {
                spec["leaseTransitions"] = json!(spec["leaseTransitions"].as_i64().unwrap_or(0) + 1);
            }
            spec["acquireTime"] = json!(now);
        }
        spec["holderIdentity"] = json!(self.identity);
        spec["leaseDurationSeconds"] = json!(LEASE_DURATION.as_secs());
        spec["renewTime"] = json!(now);
        lease
    }

    /// Give the lease up, as client-go's ReleaseOnCancel does: no holder, so the next takes it at once.
    async fn release(&self) -> Result<(), StoreError> {
        let key = self.key();
        let Some(kv) = self.registry.store.get(&key).await? else { return Ok(()) };
        let mut lease: Value = serde_json::from_slice(&kv.value).unwrap_or(Value::Null);
        if lease["spec"]["holderIdentity"].as_str() != Some(&self.identity) {
            return Ok(());
        }
        lease["spec"]["holderIdentity"] = json!("");
        lease["spec"]["leaseDurationSeconds"] = json!(1);
        match self.registry.store.update(&key, crate::registry::encode(&lease), kv.mod_revision).await {
            Ok(_) | Err(StoreError::Conflict { .. }) | Err(StoreError::NotFound) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

/// Now as a `metav1.MicroTime`.
fn micro_time() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job on a schedule runs when it falls due, whoever runs the schedule: a leader that takes over
    /// midway goes on from the last run and its note, rather than waiting a whole period again.
    #[tokio::test]
    async fn a_schedule_goes_on_across_leaders() {
        let dir = tempfile::tempdir().unwrap();
        let store: std::sync::Arc<dyn crate::storage::Store> =
            std::sync::Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let registry = Registry::new(store, "/registry");
        let every = Duration::from_secs(2);
        let runs = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let started = Instant::now();
        let leader = |n: i64| {
            let runs = runs.clone();
            tokio::spawn(on_schedule(registry.clone(), "test", every, move |last| {
                runs.lock().unwrap().push((n, last, started.elapsed()));
                std::future::ready(n * 100)
            }))
        };
        let first = leader(1);
        tokio::time::sleep(Duration::from_millis(1000)).await;
        first.abort();
        let second = leader(2);
        tokio::time::sleep(Duration::from_millis(2200)).await;
        second.abort();
        let runs = runs.lock().unwrap().clone();
        assert_eq!(runs[0].0, 1, "{runs:?}");
        assert_eq!(runs[0].1, None, "the very first run has no note: {runs:?}");
        // The second leader ran when the first's period ended (2 s), not a period after it took over
        // (3 s), with the first's note.
        let (n, last, at) = runs[1];
        assert_eq!((n, last), (2, Some(100)), "{runs:?}");
        assert!(at >= Duration::from_millis(1900) && at < Duration::from_millis(2800), "{runs:?}");
    }

    #[tokio::test]
    async fn one_replica_leads_another_waits_and_takes_over_when_it_is_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let store: std::sync::Arc<dyn crate::storage::Store> =
            std::sync::Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let registry = Registry::new(store, "/registry");
        let mut a = Elector { registry: registry.clone(), identity: "a".into(), observed: None };
        let mut b = Elector { registry: registry.clone(), identity: "b".into(), observed: None };
        assert!(a.try_acquire_or_renew().await.unwrap(), "the first takes a lease nobody holds");
        assert!(!b.try_acquire_or_renew().await.unwrap(), "a lease renewed is not taken");
        assert!(a.try_acquire_or_renew().await.unwrap(), "the holder renews");
        // Seen unchanged for a whole lease duration, it is taken, and counted as a transition.
        assert!(!b.try_acquire_or_renew().await.unwrap(), "renewed since b last looked");
        b.observed = b.observed.map(|(rev, at)| (rev, at.checked_sub(LEASE_DURATION).unwrap()));
        assert!(b.try_acquire_or_renew().await.unwrap(), "an expired lease is taken");
        assert!(!a.try_acquire_or_renew().await.unwrap(), "the old holder sees it lost the lease");
        let kv = registry.store.get(&a.key()).await.unwrap().unwrap();
        let lease: Value = serde_json::from_slice(&kv.value).unwrap();
        assert_eq!((&lease["spec"]["holderIdentity"], &lease["spec"]["leaseTransitions"]), (&json!("b"), &json!(1)));
        // Given up, it is taken at once.
        b.release().await.unwrap();
        assert!(a.try_acquire_or_renew().await.unwrap());
    }
}
