//! The etcd backend: the same `Store` contract over a real etcd (3.4+) through `etcd-client`.
//!
//! Writes are single transactions that compare the key's create or mod revision, so they are
//! compare-and-swap exactly like the embedded store. Watches reconnect on their own after etcd restarts,
//! resuming from the last revision they delivered.
//!
//! A create or update that etcd has not answered within a short while is sent again (see
//! `WRITE_PATIENCE`): a member that forwarded it to a leader that died holds it until etcd's own
//! request timeout (7 s with the default election timeout), while the other members elect a new
//! leader in about one. Sending it again is safe because a write is told by its bytes: when the
//! again-sent transaction's compare fails and the key holds exactly what was written (read in the
//! same transaction), the earlier one landed, and the write is answered as done at the revision it
//! landed at. When the key holds something else, the earlier attempt may have landed and been
//! written over since, or not: the answer is `OutcomeUnknown` (kube's 504), never a conflict or an
//! "already exists" that would make the caller write again.
//!
//! A write that timed out is not sent again blindly: one sent before the new leader is elected is
//! lost as the first was, and would hold its client for its whole patience. It waits until etcd
//! answers a linearizable read started after the timeout (see `Recovery`), which takes a leader that
//! a quorum follows, and is sent then; or, when etcd answers no read for a while, sent anyway.
//!
//! With several members, a member that stops answering while the others answer (frozen, or cut off
//! from its peers) is taken out of the client's balancer until it answers again (see `members`), and
//! watches are opened again on the others.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, KvClient, TlsOptions, Txn, TxnOp,
    TxnOpResponse, WatchClient, WatchOptions,
};
use futures::StreamExt;

use super::keys::prefix_end;
use super::{Guard, KeyValue, RangeRequest, RangeResult, Revision, Store, StoreError, WatchEvent, WatchStream};

/// TLS material for reaching etcd.
#[derive(Debug, Clone, Default)]
pub struct EtcdTls {
    /// CA bundle (PEM) that signed etcd's serving certificate.
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate (PEM).
    pub cert_file: Option<std::path::PathBuf>,
    /// Client key (PEM).
    pub key_file: Option<std::path::PathBuf>,
}

mod members;

/// A `Store` over etcd.
pub struct EtcdStore {
    /// The key-value client alone: calls clone it because its methods take `&mut self`, and a whole
    /// `Client` is eight gRPC clients, each clone and drop of which costs atomics on every request.
    kv: KvClient,
    /// The watch client, with the same reply limit as `kv`.
    watch: WatchClient,
    /// The last health probe, which later ones within `PROBE_EVERY` answer with.
    probe: Arc<Probe>,
    /// When etcd last answered a read that stuck writes wait on before they are sent again.
    recovery: Arc<Recovery>,
    /// Which members take requests; watches reopen when one is taken out.
    members: members::Members,
}

/// How long a stuck write's probe waits for etcd's answer: a read held by a member that follows a
/// dead leader is given up on this soon, and the next probe sent. An etcd so slow that no read is
/// answered this soon gets each write again after `RECOVERY_WAIT` instead, where it used to get it
/// at once.
const RECOVERY_PROBE: Duration = Duration::from_millis(300);
/// How long a stuck write waits for etcd to answer a probe before it is sent again anyway (a slow
/// etcd that answers no read this soon may still take the write).
const RECOVERY_WAIT: Duration = Duration::from_millis(1500);

/// Whether etcd has answered a linearizable read since a given moment, for the writes that timed
/// out. One of them probes at a time, the others wait to be told: during a leader's election every
/// write in flight times out at once, and each sending reads of its own would add hundreds of
/// requests to an etcd that is electing. Atomics and a `Notify` rather than a lock: the prober
/// holds nothing while it waits on etcd, and a waiter dropped mid-wait (its client gone) leaves
/// nothing behind; a prober dropped mid-probe gives the turn back in `Turn`'s drop.
struct Recovery {
    /// Tokio's clock, which tests pause and move.
    epoch: tokio::time::Instant,
    /// The latest start of a probe that etcd answered, in microseconds from `epoch` plus one (0 for
    /// none yet).
    answered: AtomicU64,
    /// Whether a probe is under way.
    probing: std::sync::atomic::AtomicBool,
    /// Woken when a probe ends.
    answers: tokio::sync::Notify,
}

/// The turn to probe, given back when dropped, waking the waiters: to see an answer, or to take the
/// turn when the prober went without one (its request dropped, or its own wait over).
struct Turn<'a>(&'a Recovery);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.probing.store(false, Ordering::Release);
        self.0.answers.notify_waiters();
    }
}

impl Recovery {
    fn new() -> Self {
        Recovery {
            epoch: tokio::time::Instant::now(),
            answered: AtomicU64::new(0),
            probing: std::sync::atomic::AtomicBool::new(false),
            answers: tokio::sync::Notify::new(),
        }
    }

    /// Now, as `answered` counts.
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64 + 1
    }

    /// Return once etcd has answered a probe started at `since` (a `now()`) or later, or after
    /// `limit`; `probe` reads once through etcd's leader.
    async fn answered_since<P, Fut>(&self, since: u64, limit: Duration, probe: P)
    where
        P: Fn() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let told = self.answers.notified();
            let mut told = std::pin::pin!(told);
            told.as_mut().enable();
            if self.answered.load(Ordering::Acquire) >= since || tokio::time::Instant::now() >= deadline {
                return;
            }
            if self.probing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                let turn = Turn(self);
                let (started, sent) = (self.now(), tokio::time::Instant::now());
                let answered =
                    matches!(tokio::time::timeout_at(deadline.min(sent + RECOVERY_PROBE), probe()).await, Ok(true));
                if answered {
                    self.answered.fetch_max(started, Ordering::AcqRel);
                    // Given back after the answer is recorded: the waiters it wakes see both.
                    drop(turn);
                    return;
                }
                // Refused at once (no member reachable): a moment before the next probe.
                tokio::time::sleep_until(deadline.min(sent + RECOVERY_PROBE)).await;
                drop(turn);
            } else {
                // Bounded, though a prober going without an answer wakes the waiters (`Turn`).
                let _ = tokio::time::timeout_at(deadline.min(tokio::time::Instant::now() + RECOVERY_PROBE), told).await;
            }
        }
    }
}

/// How often `healthy` asks etcd at most: `/readyz` and `componentstatuses` are open to anyone, and
/// each probe is a linearizable read through etcd's leader. kube-apiserver's etcd check allows one per
/// half its 2 s timeout and answers the rest with the last result; so does this.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// The key probes read: any key will do, this one is never written.
const HEALTH_KEY: &str = "\0kgate-health";
/// How long a probe waits for etcd's answer (kube-apiserver's default health check timeout).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The last health probe's start and answer. Atomics rather than a lock: the caller that moves
/// `started` forward probes, the others read `last` without waiting, so a black-holed etcd holds one
/// request for the probe's timeout rather than every request queued behind a lock.
struct Probe {
    epoch: std::time::Instant,
    /// Milliseconds from `epoch` when the last probe started; `u64::MAX` before the first.
    started: AtomicU64,
    /// The latest-started probe that finished: its start in milliseconds shifted left once, and 1
    /// if etcd answered it. Probes overlap (one a second, each waiting up to two), so one is kept
    /// only over an older one (`fetch_max`), as kube keeps a result only over an older one.
    last: AtomicU64,
}

impl Probe {
    fn new() -> Self {
        Probe { epoch: std::time::Instant::now(), started: AtomicU64::new(u64::MAX), last: AtomicU64::new(0) }
    }

    /// What the latest-started finished probe found (false before any).
    fn ok(&self) -> bool {
        self.last.load(Ordering::Acquire) & 1 == 1
    }

    /// When this probe starts, for the one caller that claims this `PROBE_EVERY`'s probe.
    fn claim(&self) -> Option<u64> {
        let now = self.epoch.elapsed().as_millis() as u64;
        let last = self.started.load(Ordering::Acquire);
        if last != u64::MAX && now < last.saturating_add(PROBE_EVERY.as_millis() as u64) {
            return None;
        }
        self.started.compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire).ok().map(|_| now)
    }
}

/// The largest reply taken from etcd. gRPC's default is 4 MiB, which a collection read whole (as
/// kube-apiserver reads one, with no limit of its own) or a watch's batch of missed events passes
/// easily; a watch that kept failing on one would retry the same batch for ever. kube-apiserver takes
/// replies of up to 2 GiB for the same reasons.
const MAX_REPLY: usize = i32::MAX as usize;

/// Whether etcd refused a request for its size: its own check (`--max-request-bytes`), or its gRPC
/// server's, which allows 512 KiB more for framing and so sees the largest requests first. Only these
/// two: gRPC's send-side refusal of a huge reply, or a full database, is not the client's to mend.
fn is_too_large(s: &tonic::Status) -> bool {
    (s.code() == tonic::Code::InvalidArgument && s.message().contains("etcdserver: request is too large"))
        || (s.code() == tonic::Code::ResourceExhausted && s.message().contains("received message larger than max"))
}

fn map_err(e: etcd_client::Error) -> StoreError {
    match &e {
        etcd_client::Error::GRpcStatus(s) => {
            let msg = s.message();
            if msg.contains("compacted") {
                StoreError::Compacted { requested: 0, compacted: 0 }
            } else if msg.contains("future rev") {
                StoreError::FutureRevision { requested: 0, current: 0 }
            } else if is_too_large(s) {
                StoreError::TooLarge(msg.to_string())
            } else {
                match s.code() {
                    tonic_code::UNAVAILABLE | tonic_code::DEADLINE_EXCEEDED | tonic_code::CANCELLED => {
                        StoreError::Unavailable(msg.to_string())
                    }
                    // The connection broke mid-call (a member killed with the call in flight): tonic
                    // reports it so. The call may have reached etcd, so a write is sent again told
                    // that it may have landed (see `certainly_unsent`), not answered as a failure.
                    tonic_code::UNKNOWN if msg == "transport error" => StoreError::Unavailable(msg.to_string()),
                    _ => StoreError::Internal(e.to_string()),
                }
            }
        }
        etcd_client::Error::TransportError(_) | etcd_client::Error::IoError(_) => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Internal(e.to_string()),
    }
}

/// The gRPC codes that mean "try again later".
mod tonic_code {
    use tonic::Code;
    pub const UNAVAILABLE: Code = Code::Unavailable;
    pub const DEADLINE_EXCEEDED: Code = Code::DeadlineExceeded;
    pub const CANCELLED: Code = Code::Cancelled;
    pub const UNKNOWN: Code = Code::Unknown;
}

fn kv_of(kv: &etcd_client::KeyValue) -> Result<KeyValue, StoreError> {
    Ok(KeyValue {
        key: kv.key_str().map_err(|e| StoreError::Internal(e.to_string()))?.to_string(),
        value: kv.value().to_vec(),
        mod_revision: kv.mod_revision(),
    })
}

impl EtcdStore {
    /// Changes under `prefix` after `after`, as much of them as `sent` asks for.
    async fn open_watch(&self, prefix: &str, after: Revision, sent: Sent) -> Result<WatchStream, StoreError> {
        // etcd reports a compacted start revision only on the stream; probe it with a read at the first
        // revision the watch needs, so callers get `Compacted` synchronously as from the embedded store.
        let probe = GetOptions::new().with_revision(after + 1).with_count_only();
        match self.kv().get(prefix, Some(probe)).await.map_err(map_err) {
            Err(StoreError::Compacted { .. }) => {
                return Err(StoreError::Compacted { requested: after, compacted: after });
            }
            Err(StoreError::FutureRevision { .. }) | Ok(_) => {}
            Err(e) => return Err(e),
        }
        let state = EtcdWatch {
            client: self.watch.clone(),
            left: self.members.left(),
            alive_by: None,
            ask: false,
            prefix: prefix.to_string(),
            after,
            inner: None,
            pending: std::collections::VecDeque::new(),
            done: false,
            sent,
        };
        Ok(Box::pin(futures::stream::unfold(state, |mut st| async move {
            let item = st.next().await?;
            Some((item, st))
        })))
    }

    /// Connect to the endpoints. Connection failures later are retried by the channel itself.
    pub async fn connect(endpoints: &[String], tls: &EtcdTls) -> Result<Self, StoreError> {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(30))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5))
            .with_keep_alive_while_idle(true);
        if tls.ca_file.is_some() || tls.cert_file.is_some() {
            let mut t = TlsOptions::new();
            if let Some(ca) = &tls.ca_file {
                let pem = std::fs::read(ca).map_err(|e| StoreError::Internal(format!("{}: {e}", ca.display())))?;
                t = t.ca_certificate(etcd_client::Certificate::from_pem(pem));
            }
            if let (Some(c), Some(k)) = (&tls.cert_file, &tls.key_file) {
                let cert = std::fs::read(c).map_err(|e| StoreError::Internal(format!("{}: {e}", c.display())))?;
                let key = std::fs::read(k).map_err(|e| StoreError::Internal(format!("{}: {e}", k.display())))?;
                t = t.identity(etcd_client::Identity::from_pem(cert, key));
            }
            opts = opts.with_tls(t);
        }
        // With its scheme, as the client's balancer keys members: a member is taken out by that key.
        let scheme = if tls.ca_file.is_some() || tls.cert_file.is_some() { "https://" } else { "http://" };
        let endpoints: Vec<String> =
            endpoints.iter().map(|e| if e.contains("://") { e.clone() } else { format!("{scheme}{e}") }).collect();
        let client = Client::connect(&endpoints, Some(opts.clone())).await.map_err(map_err)?;
        let members = members::Members::start(client.clone(), &endpoints, &opts).await.map_err(map_err)?;
        Ok(EtcdStore {
            members,
            kv: client.kv_client().max_decoding_message_size(MAX_REPLY),
            watch: client.watch_client().max_decoding_message_size(MAX_REPLY),
            probe: Arc::new(Probe::new()),
            recovery: Arc::new(Recovery::new()),
        })
    }

    fn kv(&self) -> KvClient {
        self.kv.clone()
    }

    /// A write's transaction (a compare, the put of `value`, and a read of the key otherwise), sent
    /// again while stuck (`with_retries`): the revision it landed at, or `refused` of the key as the
    /// failed transaction read it.
    async fn write(
        &self,
        txn: Txn,
        value: &[u8],
        refused: impl Fn(Option<KeyValue>) -> StoreError + Copy,
    ) -> Result<Revision, StoreError> {
        let recovered = || async move {
            // Taken when the attempt timed out: this future is awaited at once.
            let since = self.recovery.now();
            let probe = || {
                let mut kv = self.kv();
                async move { kv.get(HEALTH_KEY, None).await.is_ok() }
            };
            self.recovery.answered_since(since, RECOVERY_WAIT, probe).await
        };
        let attempt = |maybe_landed| {
            let (txn, mut kv) = (txn.clone(), self.kv());
            async move {
                let resp = kv.txn(txn).await.map_err(map_err)?;
                if resp.succeeded() {
                    return Ok(resp.header().map(|h| h.revision()).unwrap_or(0));
                }
                after_failed_compare(maybe_landed, else_current(&resp)?, value, refused)
            }
        };
        with_retries(attempt, recovered).await
    }
}

/// Operations etcd takes in one transaction by default (its `--max-txn-ops`).
const MAX_TXN_OPS: usize = 128;

/// How long each attempt of a create or update may take before it is sent again, the last attempt's
/// being the whole request's deadline: the first short, since a healthy etcd answers a write in
/// milliseconds and a leader's death costs it a second to elect another; the later ones longer, so
/// that a slow etcd under load sees each write at most three times, not a storm of them (refusals of a
/// write etcd never received aside, see `MAX_REFUSALS`).
const WRITE_PATIENCE: [Duration; 3] = [Duration::from_millis(1500), Duration::from_secs(3), Duration::from_secs(30)];

/// Refusals of a write that never reached etcd (see `certainly_unsent`) not counted as attempts, per
/// write, each within the patience of the attempt it repeats. With a member just killed, each lasts
/// the 100 ms `with_retries` waits after it, so these give the channel about a second to stop
/// choosing it, where three went by in 200 ms and the client got a 503 for a write another member
/// would have taken.
const MAX_REFUSALS: usize = 10;

/// Whether an `Unavailable` failure means the write never reached etcd: a connection that could not
/// be made, or a member without a leader, which proposes nothing. Any other (a connection reset
/// mid-call, etcd's own "request timed out" or "leader changed") may follow a write that lands.
fn certainly_unsent(why: &str) -> bool {
    why.contains("tcp connect error") || why.contains("etcdserver: no leader")
}

/// Run `attempt` until it answers something other than etcd being unreachable, within
/// `WRITE_PATIENCE`; it is told whether an earlier attempt may have landed. An attempt past its
/// patience is dropped, which cancels the call; what it asked of etcd may still land, which the next
/// attempt finds (see the module's note). After a timeout the next is sent once `recovered()`
/// returns. When every attempt failed and one may have landed, the
/// outcome is unknown.
async fn with_retries<T, F, Fut, R, RFut>(mut attempt: F, recovered: R) -> Result<T, StoreError>
where
    F: FnMut(bool) -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
    R: Fn() -> RFut,
    RFut: std::future::Future<Output = ()>,
{
    let mut last = String::from("etcd did not answer");
    let (mut maybe_landed, mut refusals, mut i) = (false, 0, 0);
    // When the attempt under way must be answered by: refusals sent again within it share it.
    let mut by = None;
    while let Some(patience) = WRITE_PATIENCE.get(i) {
        let deadline = *by.get_or_insert_with(|| tokio::time::Instant::now() + *patience);
        match tokio::time::timeout_at(deadline, attempt(maybe_landed)).await {
            Ok(Err(StoreError::Unavailable(why))) => {
                let unsent = certainly_unsent(&why);
                maybe_landed |= !unsent;
                last = why;
                // Refused at once (a member that is gone): a moment for the channel to move on.
                tokio::time::sleep(Duration::from_millis(100)).await;
                // Never sent: not an attempt, a few times over (the channel may pick the same dead
                // member again while it has not yet seen it go).
                if unsent && refusals < MAX_REFUSALS && tokio::time::Instant::now() < deadline {
                    refusals += 1;
                    continue;
                }
            }
            Ok(done) => return done,
            Err(_) => {
                tracing::debug!(attempt = i, ?patience, "an etcd write took too long; sending it again");
                maybe_landed = true;
                last = format!("etcd did not answer within {patience:?}");
                if i + 1 < WRITE_PATIENCE.len() {
                    recovered().await;
                }
            }
        }
        i += 1;
        by = None;
    }
    Err(if maybe_landed { StoreError::OutcomeUnknown(last) } else { StoreError::Unavailable(last) })
}

/// What a write's transaction that failed its compare means, given the key as the transaction read
/// it: `Ok(revision)` when an earlier attempt of the same write landed (the key holds exactly
/// `value`), `Err(OutcomeUnknown)` when one may have and the key holds something else, else the
/// refusal `refused` gives.
fn after_failed_compare(
    maybe_landed: bool,
    current: Option<KeyValue>,
    value: &[u8],
    refused: impl FnOnce(Option<KeyValue>) -> StoreError,
) -> Result<Revision, StoreError> {
    match current {
        Some(kv) if maybe_landed && kv.value == value => Ok(kv.mod_revision),
        _ if maybe_landed => Err(StoreError::OutcomeUnknown(
            "an earlier attempt of the write may have landed and been changed since".into(),
        )),
        current => Err(refused(current)),
    }
}

fn else_current(resp: &etcd_client::TxnResponse) -> Result<Option<KeyValue>, StoreError> {
    for op in resp.op_responses() {
        if let TxnOpResponse::Get(g) = op {
            return g.kvs().first().map(kv_of).transpose();
        }
    }
    Ok(None)
}

#[async_trait]
impl Store for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let resp = self.kv().get(key, None).await.map_err(map_err)?;
        resp.kvs().first().map(kv_of).transpose()
    }

    async fn get_relaxed(&self, key: &str) -> Result<Option<KeyValue>, StoreError> {
        let resp = self.kv().get(key, Some(GetOptions::new().with_serializable())).await.map_err(map_err)?;
        resp.kvs().first().map(kv_of).transpose()
    }

    async fn range(&self, req: RangeRequest) -> Result<RangeResult, StoreError> {
        let start = req.start.clone().unwrap_or_else(|| req.prefix.clone());
        let mut opts = GetOptions::new().with_range(prefix_end(&req.prefix));
        if req.limit > 0 {
            opts = opts.with_limit(req.limit as i64);
        }
        if let Some(r) = req.revision {
            opts = opts.with_revision(r);
        }
        let resp = self.kv().get(start, Some(opts)).await.map_err(|e| match map_err(e) {
            StoreError::Compacted { .. } => {
                StoreError::Compacted { requested: req.revision.unwrap_or(0), compacted: req.revision.unwrap_or(0) }
            }
            StoreError::FutureRevision { .. } => {
                StoreError::FutureRevision { requested: req.revision.unwrap_or(0), current: 0 }
            }
            other => other,
        })?;
        let revision = req.revision.unwrap_or_else(|| resp.header().map(|h| h.revision()).unwrap_or(0));
        let kvs = resp.kvs().iter().map(kv_of).collect::<Result<Vec<_>, _>>()?;
        Ok(RangeResult { kvs, more: resp.more(), revision })
    }

    async fn create_guarded(&self, key: &str, value: Vec<u8>, guard: Option<&Guard>) -> Result<Revision, StoreError> {
        let mut when = vec![Compare::create_revision(key, CompareOp::Equal, 0)];
        if let Some(g) = guard {
            when.push(Compare::mod_revision(g.key.as_str(), CompareOp::Equal, g.mod_revision));
        }
        // A failed transaction does not say which compare failed: the key is read back in the same
        // round trip to tell "exists" from "guard changed", and an earlier attempt's landing.
        let txn =
            Txn::new().when(when).and_then([TxnOp::put(key, value.clone(), None)]).or_else([TxnOp::get(key, None)]);
        self.write(txn, &value, |current| {
            if guard.is_none() || current.is_some() {
                StoreError::AlreadyExists
            } else {
                StoreError::GuardChanged
            }
        })
        .await
    }

    async fn create_all(
        &self,
        items: &[(String, Vec<u8>)],
        guard: Option<&Guard>,
    ) -> Result<Option<Revision>, StoreError> {
        // etcd refuses a transaction of more operations than its `--max-txn-ops` (128 by default).
        if items.len() + usize::from(guard.is_some()) > MAX_TXN_OPS {
            return Ok(None);
        }
        let mut when: Vec<Compare> =
            items.iter().map(|(k, _)| Compare::create_revision(k.as_str(), CompareOp::Equal, 0)).collect();
        if let Some(g) = guard {
            when.push(Compare::mod_revision(g.key.as_str(), CompareOp::Equal, g.mod_revision));
        }
        let puts: Vec<TxnOp> = items.iter().map(|(k, v)| TxnOp::put(k.as_str(), v.clone(), None)).collect();
        // Sent once: a caller told `None` (or an error) writes each key on its own, which finds any
        // this one made.
        let resp = self.kv().txn(Txn::new().when(when).and_then(puts)).await.map_err(map_err)?;
        Ok(resp.succeeded().then(|| resp.header().map(|h| h.revision()).unwrap_or(0)))
    }

    async fn delete_all(&self, items: &[(String, Revision)]) -> Result<bool, StoreError> {
        if items.len() > MAX_TXN_OPS {
            return Ok(false);
        }
        let when: Vec<Compare> =
            items.iter().map(|(k, r)| Compare::mod_revision(k.as_str(), CompareOp::Equal, *r)).collect();
        let deletes: Vec<TxnOp> = items.iter().map(|(k, _)| TxnOp::delete(k.as_str(), None)).collect();
        let resp = self.kv().txn(Txn::new().when(when).and_then(deletes)).await.map_err(map_err)?;
        Ok(resp.succeeded())
    }

    async fn ranges(&self, reqs: Vec<RangeRequest>) -> Result<Vec<RangeResult>, StoreError> {
        let mut out = Vec::with_capacity(reqs.len());
        for chunk in reqs.chunks(MAX_TXN_OPS) {
            let gets: Vec<TxnOp> = chunk
                .iter()
                .map(|r| {
                    let mut opts = GetOptions::new().with_range(prefix_end(&r.prefix));
                    if r.limit > 0 {
                        opts = opts.with_limit(r.limit as i64);
                    }
                    if let Some(at) = r.revision {
                        opts = opts.with_revision(at);
                    }
                    TxnOp::get(r.start.clone().unwrap_or_else(|| r.prefix.clone()), Some(opts))
                })
                .collect();
            let resp = self.kv().txn(Txn::new().and_then(gets)).await.map_err(map_err)?;
            let revision = resp.header().map(|h| h.revision()).unwrap_or(0);
            for op in resp.op_responses() {
                if let TxnOpResponse::Get(g) = op {
                    let kvs = g.kvs().iter().map(kv_of).collect::<Result<Vec<_>, _>>()?;
                    out.push(RangeResult { kvs, more: g.more(), revision });
                }
            }
        }
        if out.len() != reqs.len() {
            return Err(StoreError::Internal("etcd answered fewer reads than asked".into()));
        }
        Ok(out)
    }

    async fn update(&self, key: &str, value: Vec<u8>, expected: Revision) -> Result<Revision, StoreError> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::put(key, value.clone(), None)])
            .or_else([TxnOp::get(key, None)]);
        self.write(txn, &value, |current| match current {
            None => StoreError::NotFound,
            current => StoreError::Conflict { current },
        })
        .await
    }

    async fn delete(&self, key: &str, expected: Option<Revision>) -> Result<(Revision, KeyValue), StoreError> {
        // Without an expected revision, still compare against the revision just read so the returned
        // value is exactly the one deleted.
        let mut client = self.kv();
        let expected = match expected {
            Some(e) => e,
            None => match self.get(key).await? {
                Some(kv) => kv.mod_revision,
                None => return Err(StoreError::NotFound),
            },
        };
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, expected)])
            .and_then([TxnOp::delete(key, Some(DeleteOptions::new().with_prev_key()))])
            .or_else([TxnOp::get(key, None)]);
        // Not sent again: a delete that may have landed is answered as unknown (504), which clients
        // do not resend on their own as they do a 503.
        let resp = client.txn(txn).await.map_err(|e| match map_err(e) {
            StoreError::Unavailable(why) if !certainly_unsent(&why) => StoreError::OutcomeUnknown(why),
            other => other,
        })?;
        if !resp.succeeded() {
            return match else_current(&resp)? {
                None => Err(StoreError::NotFound),
                current => Err(StoreError::Conflict { current }),
            };
        }
        let rev = resp.header().map(|h| h.revision()).unwrap_or(0);
        for op in resp.op_responses() {
            if let TxnOpResponse::Delete(d) = op {
                if let Some(prev) = d.prev_kvs().first() {
                    return Ok((rev, kv_of(prev)?));
                }
            }
        }
        Err(StoreError::NotFound)
    }

    async fn revision(&self) -> Result<Revision, StoreError> {
        // A linearizable read of a key that never exists: the header carries the current revision.
        let resp = self.kv().get("\0kgate-revision", None).await.map_err(map_err)?;
        Ok(resp.header().map(|h| h.revision()).unwrap_or(0))
    }

    async fn watch(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.open_watch(prefix, after, Sent::WithPrevious).await
    }

    async fn watch_current(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.open_watch(prefix, after, Sent::Current).await
    }

    async fn watch_deletes(&self, prefix: &str, after: Revision) -> Result<WatchStream, StoreError> {
        self.open_watch(prefix, after, Sent::Deletes).await
    }

    async fn compact(&self, revision: Revision) -> Result<(), StoreError> {
        match self.kv().compact(revision, None).await {
            Ok(_) => Ok(()),
            Err(e) => match map_err(e) {
                StoreError::Compacted { .. } => Ok(()),
                other => Err(other),
            },
        }
    }

    async fn healthy(&self) -> bool {
        let Some(started) = self.probe.claim() else {
            return self.probe.ok();
        };
        // A task of its own, so that its answer is kept when the caller goes (a probe's client timing
        // out first, as the kubelet's 1 s default does): otherwise every caller until the next probe
        // would read what the one before found.
        let (probe, mut kv) = (self.probe.clone(), self.kv());
        let asked = tokio::spawn(async move {
            let ok = matches!(tokio::time::timeout(PROBE_TIMEOUT, kv.get(HEALTH_KEY, None)).await, Ok(Ok(_)));
            probe.last.fetch_max(started << 1 | u64::from(ok), Ordering::AcqRel);
            ok
        });
        asked.await.unwrap_or(false)
    }
}

struct EtcdWatch {
    client: WatchClient,
    prefix: String,
    /// Last revision delivered (or the start point).
    after: Revision,
    inner: Option<etcd_client::WatchStream>,
    /// Events of the last response not yet returned (a response can carry thousands).
    pending: std::collections::VecDeque<WatchEvent>,
    done: bool,
    /// What the watch asks etcd to send.
    sent: Sent,
    /// Moves when an etcd member is taken out of the balancer: the stream may be on it, frozen.
    left: tokio::sync::watch::Receiver<u64>,
    /// Set when a member was taken out: by when the stream must answer the progress request sent
    /// then, or be opened again on the others. Only the answer counts: events already received
    /// before the member froze may still be waiting to be read.
    alive_by: Option<tokio::time::Instant>,
    /// A progress request is to be sent on the stream.
    ask: bool,
}

/// How long a watch's stream has to answer a progress request once a member was taken out; each
/// watch adds up to `ALIVE_JITTER`, so that the watches on a frozen member do not all reopen at once.
const ALIVE_WITHIN: Duration = Duration::from_secs(2);
const ALIVE_JITTER: Duration = Duration::from_secs(1);
/// How long opening a watch may take: etcd answers at once with the watch created, so a longer wait
/// is a member that does not answer (the request's own timeout is 30 s).
const OPEN_WITHIN: Duration = Duration::from_secs(5);

/// What a watch asks etcd to send.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sent {
    /// Every change, with the key's previous value (see `Store::watch_current`).
    WithPrevious,
    /// Every change as it is.
    Current,
    /// Deletions alone (see `Store::watch_deletes`): etcd filters the rest out before sending.
    Deletes,
}

impl EtcdWatch {
    /// The next event; reconnects transparently, fails only on compaction.
    async fn next(&mut self) -> Option<Result<WatchEvent, StoreError>> {
        let mut backoff = Duration::from_millis(100);
        loop {
            if self.done {
                return None;
            }
            if let Some(ev) = self.pending.pop_front() {
                return Some(Ok(ev));
            }
            if self.inner.is_none() {
                let mut opts = WatchOptions::new()
                    .with_range(prefix_end(&self.prefix))
                    .with_start_revision(self.after + 1)
                    .with_progress_notify();
                match self.sent {
                    Sent::WithPrevious => opts = opts.with_prev_key(),
                    Sent::Deletes => opts = opts.with_filters([etcd_client::WatchFilterType::NoPut]),
                    Sent::Current => {}
                }
                let open = tokio::time::timeout(OPEN_WITHIN, self.client.watch(self.prefix.as_str(), Some(opts)));
                let opened = open.await.unwrap_or_else(|_| {
                    Err(etcd_client::Error::WatchError(format!("no answer within {OPEN_WITHIN:?}")))
                });
                match opened {
                    Ok(s) => {
                        (self.alive_by, self.ask) = (None, false);
                        self.inner = Some(s);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, prefix = %self.prefix, "etcd watch failed; retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        continue;
                    }
                }
            }
            let inner = self.inner.as_mut().expect("set above");
            if std::mem::take(&mut self.ask) && inner.request_progress().await.is_err() {
                self.inner = None;
                continue;
            }
            let alive_by = self.alive_by;
            let next = tokio::select! {
                next = inner.next() => next,
                // Err: a single member (nothing is ever taken out) or the store is going.
                Ok(()) = self.left.changed(), if alive_by.is_none() => {
                    let jitter = ALIVE_JITTER.mul_f64(rand::random::<f64>());
                    (self.ask, self.alive_by) = (true, Some(tokio::time::Instant::now() + ALIVE_WITHIN + jitter));
                    continue;
                }
                () = tokio::time::sleep_until(alive_by.unwrap_or_else(tokio::time::Instant::now)), if alive_by.is_some() => {
                    tracing::info!(prefix = %self.prefix, "an etcd watch went silent as a member was taken out; reopening it on the others");
                    (self.inner, self.alive_by) = (None, None);
                    continue;
                }
            };
            match next {
                Some(Ok(resp)) => {
                    if resp.compact_revision() > 0 {
                        self.done = true;
                        return Some(Err(StoreError::Compacted {
                            requested: self.after,
                            compacted: resp.compact_revision() - 1,
                        }));
                    }
                    if resp.canceled() {
                        tracing::warn!(prefix = %self.prefix, reason = resp.cancel_reason(), "etcd canceled a watch; resuming");
                        self.inner = None;
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                        continue;
                    }
                    let mut last = self.after;
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let prev = match ev.prev_kv().map(kv_of).transpose() {
                            Ok(p) => p,
                            Err(e) => return Some(Err(e)),
                        };
                        let item = match ev.event_type() {
                            EventType::Put => match kv_of(kv) {
                                // etcd counts a key's versions from its creation.
                                Ok(kv) => {
                                    WatchEvent::Put { created: ev.kv().is_some_and(|k| k.version() == 1), kv, prev }
                                }
                                Err(e) => return Some(Err(e)),
                            },
                            EventType::Delete => WatchEvent::Delete {
                                revision: kv.mod_revision(),
                                prev,
                                key: String::from_utf8_lossy(kv.key()).into_owned(),
                            },
                        };
                        last = last.max(item.revision());
                        self.pending.push_back(item);
                    }
                    // The answer to a progress request (watch id -1) shows the stream alive, and no
                    // more: etcd before 3.5.8 may send it ahead of events of the revision it names.
                    if resp.watch_id() == -1 {
                        self.alive_by = None;
                    } else if resp.events().is_empty() {
                        if let Some(h) = resp.header() {
                            // A progress notification: everything up to the header revision was sent.
                            if h.revision() > self.after && !resp.created() {
                                self.after = h.revision();
                                return Some(Ok(WatchEvent::Progress(self.after)));
                            }
                        }
                    }
                    self.after = last;
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, prefix = %self.prefix, "etcd watch broke; resuming");
                    self.inner = None;
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                None => {
                    self.inner = None;
                    tokio::time::sleep(backoff).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::{Code, Status};

    fn mapped(code: Code, msg: &str) -> StoreError {
        map_err(etcd_client::Error::GRpcStatus(Status::new(code, msg)))
    }

    /// A write stuck at a member is sent again once its patience runs out, told that the first may
    /// have landed; one refused for etcd being unreachable is tried again; any other answer is the
    /// answer. Failing every attempt, the outcome is unknown once any attempt may have reached etcd.
    #[tokio::test(start_paused = true)]
    async fn writes_are_sent_again_when_stuck_or_refused() {
        let started = tokio::time::Instant::now();
        let got = with_retries(
            |maybe_landed| async move {
                if !maybe_landed {
                    // A member holding the write for etcd's 7 s.
                    tokio::time::sleep(Duration::from_secs(7)).await;
                }
                Ok::<_, StoreError>(maybe_landed)
            },
            || async {},
        )
        .await;
        assert!(got.unwrap(), "the second attempt knows the first may have landed");
        assert_eq!(started.elapsed(), WRITE_PATIENCE[0], "sent again after the first patience, not after 7 s");

        let calls = std::sync::atomic::AtomicUsize::new(0);
        let refused: Result<(), _> = with_retries(
            |_| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async { Err(StoreError::Unavailable("tcp connect error".into())) }
            },
            || async {},
        )
        .await;
        assert!(matches!(refused, Err(StoreError::Unavailable(_))), "never sent: {refused:?}");
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), WRITE_PATIENCE.len() + MAX_REFUSALS);

        let reset: Result<(), _> = with_retries(
            |_| async { Err(StoreError::Unavailable("etcdserver: request timed out".into())) },
            || async {},
        )
        .await;
        assert!(matches!(reset, Err(StoreError::OutcomeUnknown(_))), "may have landed: {reset:?}");

        let calls = std::sync::atomic::AtomicUsize::new(0);
        let got: Result<(), _> = with_retries(
            |_| {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async { Err(StoreError::AlreadyExists) }
            },
            || async {},
        )
        .await;
        assert!(matches!(got, Err(StoreError::AlreadyExists)));
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 1, "an answer is not retried");
    }

    /// A write that timed out is sent again once etcd answers a read started after the timeout, not
    /// blindly: sent during the election, it would be lost as the first was.
    #[tokio::test(start_paused = true)]
    async fn a_stuck_write_is_sent_again_once_etcd_answers() {
        let recovery = Recovery::new();
        let started = tokio::time::Instant::now();
        // etcd elects a new leader 1.8 s after the first attempt; until then every attempt is lost.
        let elected = started + Duration::from_millis(1800);
        let sent = std::sync::Mutex::new(Vec::new());
        let probes = std::sync::atomic::AtomicUsize::new(0);
        let probe = || {
            probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                if tokio::time::Instant::now() < elected {
                    std::future::pending::<()>().await;
                }
                true
            }
        };
        let got = with_retries(
            |_| {
                sent.lock().unwrap().push(tokio::time::Instant::now() - started);
                async move {
                    if tokio::time::Instant::now() < elected {
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, StoreError>(())
                }
            },
            || recovery.answered_since(recovery.now(), RECOVERY_WAIT, probe),
        )
        .await;
        assert!(got.is_ok());
        let sent = sent.into_inner().unwrap();
        assert_eq!(sent.len(), 2, "sent once more, after the election: {sent:?}");
        // Probes of 300 ms from the timeout at 1.5 s: the one sent at 1.8 s is answered.
        assert_eq!(sent[1], Duration::from_millis(1800), "sent again when etcd answered");
        assert_eq!(probes.load(std::sync::atomic::Ordering::Relaxed), 2);
    }

    /// Many stuck writes share one probe at a time, and all are let go by its answer; with no answer
    /// they are let go after `RECOVERY_WAIT`.
    #[tokio::test(start_paused = true)]
    async fn stuck_writes_share_one_probe_and_wait_a_bounded_time() {
        let recovery = Recovery::new();
        let start = tokio::time::Instant::now();
        let probes = std::sync::atomic::AtomicUsize::new(0);
        let answer_at = start + Duration::from_millis(700);
        let probe = || {
            probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                tokio::time::sleep_until(answer_at.max(tokio::time::Instant::now() + Duration::from_millis(10))).await;
                tokio::time::Instant::now() >= answer_at
            }
        };
        let since = recovery.now();
        let waits = (0..50).map(|_| recovery.answered_since(since, RECOVERY_WAIT, probe));
        futures::future::join_all(waits).await;
        assert!(start.elapsed() < Duration::from_millis(800), "let go by the answer: {:?}", start.elapsed());
        // Probes at 0 and 300 ms time out; the one at 600 ms is answered at 700.
        assert_eq!(probes.load(std::sync::atomic::Ordering::Relaxed), 3, "one probe at a time");

        let start = tokio::time::Instant::now();
        let since = recovery.now();
        recovery.answered_since(since, RECOVERY_WAIT, || async { false }).await;
        assert_eq!(start.elapsed(), RECOVERY_WAIT, "sent anyway when etcd answers nothing");
    }

    /// One probe a second is claimed, whoever asks; and an older probe finishing late does not
    /// overwrite a newer one's answer.
    #[test]
    fn health_probes_are_claimed_once_a_second_and_the_newest_answer_stays() {
        let mut probe = Probe::new();
        probe.epoch -= Duration::from_secs(5);
        assert!(!probe.ok(), "no answer yet reads as down");
        let first = probe.claim().expect("the first caller probes");
        assert_eq!(probe.claim(), None, "within the second the others read the last answer");
        // The first probe hangs; a later one (started a second on) answers first.
        probe.started.store(first.saturating_sub(PROBE_EVERY.as_millis() as u64 + 1), Ordering::Release);
        let second = probe.claim().expect("a second later another probes");
        probe.last.fetch_max((second + 1000) << 1 | 1, Ordering::AcqRel);
        probe.last.fetch_max(first << 1, Ordering::AcqRel);
        assert!(probe.ok(), "the hung probe's late failure does not overwrite the newer success");
    }

    /// A compare that fails after an attempt that may have landed: the write's own bytes mean it
    /// landed; anything else is not known, never a conflict the caller would act on.
    #[test]
    fn a_failed_compare_after_a_lost_attempt() {
        let kv = |v: &[u8]| Some(KeyValue { key: "k".into(), value: v.to_vec(), mod_revision: 9 });
        let conflict = |current| StoreError::Conflict { current };
        assert_eq!(after_failed_compare(true, kv(b"mine"), b"mine", conflict).unwrap(), 9);
        let other = after_failed_compare(true, kv(b"theirs"), b"mine", conflict);
        assert!(matches!(other, Err(StoreError::OutcomeUnknown(_))), "{other:?}");
        let gone = after_failed_compare(true, None, b"mine", conflict);
        assert!(matches!(gone, Err(StoreError::OutcomeUnknown(_))), "{gone:?}");
        let first = after_failed_compare(false, kv(b"mine"), b"mine", conflict);
        assert!(
            matches!(first, Err(StoreError::Conflict { .. })),
            "a first attempt's compare is a conflict: {first:?}"
        );
    }

    #[test]
    fn only_requests_too_large_for_etcd_are_the_clients_fault() {
        assert!(matches!(mapped(Code::InvalidArgument, "etcdserver: request is too large"), StoreError::TooLarge(_)));
        let grpc = "grpc: received message larger than max (2097820 vs. 2097152)";
        assert!(matches!(mapped(Code::ResourceExhausted, grpc), StoreError::TooLarge(_)));
        for (code, msg) in [
            (Code::ResourceExhausted, "grpc: trying to send message larger than max (3000000000 vs. 2147483647)"),
            (Code::ResourceExhausted, "etcdserver: mvcc: database space exceeded"),
            (Code::OutOfRange, "Error, decoded message length too large: found 5530012 bytes"),
        ] {
            assert!(matches!(mapped(code, msg), StoreError::Internal(_)), "{msg}");
        }
    }

    /// A connection broken mid-call (a member killed with the call in flight) is etcd being
    /// unavailable, and the write may have reached it; other unknown errors are not.
    #[test]
    fn a_connection_broken_mid_call_is_unavailable_and_may_have_landed() {
        let StoreError::Unavailable(why) = mapped(Code::Unknown, "transport error") else {
            panic!("a broken connection is etcd being unavailable");
        };
        assert!(!certainly_unsent(&why), "it may have reached etcd: {why}");
        assert!(matches!(mapped(Code::Unknown, "something else"), StoreError::Internal(_)));
    }
}
