//! One connection's lifetime rules, as kube-apiserver's HTTP servers keep them: a client has a bounded
//! time to send its first request (Go's HTTP/2 server waits 10 s for the preface), a connection with
//! nothing in flight is closed after an idle timeout (kube-apiserver: 90 s), and a connection whose client
//! has stopped reading what kgate sends it is cut, so it gives back its memory and its descriptor.
//!
//! The rules are judged on a snapshot of the connection's `Activity` by a pure function (`judge`); the
//! accept loop (`server`) sleeps until the next moment a verdict can change and acts on it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

pub use crate::config::Timeouts;

/// What a connection is doing, updated by its requests and their response bodies. Atomics only: each
/// request's start and end and each response chunk's release touch it from whichever task runs them.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    /// Requests whose response has not been sent whole (an open watch counts).
    in_flight: AtomicUsize,
    /// Whether a request ever arrived.
    served: AtomicBool,
    /// Milliseconds since `epoch` when `in_flight` last changed.
    changed: AtomicU64,
    /// Response bytes handed to the connection and not yet written out of kgate.
    outstanding: AtomicU64,
    /// Milliseconds since `epoch` when response bytes were last handed over or written out.
    progressed: AtomicU64,
    /// Told when a request arrives on a connection with none in flight: the verdict the accept loop
    /// sleeps on (first request or idle, both long) no longer holds, and the stall rule may fall due
    /// sooner. Every other change only moves a verdict's moment later, so the loop finds it when it
    /// wakes. A `Notify` keeps one permit, so an arrival between two looks is not missed.
    woken: tokio::sync::Notify,
}

impl Activity {
    /// A connection just accepted.
    pub fn new() -> Arc<Activity> {
        Arc::new(Activity {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            served: AtomicBool::new(false),
            changed: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            progressed: AtomicU64::new(0),
            woken: tokio::sync::Notify::new(),
        })
    }

    /// The TLS handshake is done: the first request's deadline counts from now.
    pub fn handshaken(&self) {
        self.changed.store(self.now_ms(), Ordering::Relaxed);
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A request arrived; it is in flight until the guard (held by its response body) drops.
    pub fn begin(self: &Arc<Self>) -> InFlight {
        self.served.store(true, Ordering::Relaxed);
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        self.changed.store(self.now_ms(), Ordering::Relaxed);
        if before == 0 {
            self.woken.notify_one();
        }
        InFlight(self.clone())
    }

    /// `n` response bytes were handed to the connection.
    pub fn sent(&self, n: u64) {
        self.outstanding.fetch_add(n, Ordering::AcqRel);
        self.progressed.store(self.now_ms(), Ordering::Relaxed);
    }

    /// `n` response bytes left kgate (written to the socket, or into the TLS layer's buffer).
    pub fn written(&self, n: u64) {
        self.outstanding.fetch_sub(n, Ordering::AcqRel);
        self.progressed.store(self.now_ms(), Ordering::Relaxed);
    }

    /// What `judge` needs, read now.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            now: self.now_ms(),
            in_flight: self.in_flight.load(Ordering::Acquire),
            served: self.served.load(Ordering::Relaxed),
            changed: self.changed.load(Ordering::Relaxed),
            outstanding: self.outstanding.load(Ordering::Acquire),
            progressed: self.progressed.load(Ordering::Relaxed),
        }
    }

    /// Resolves once a request arrives on the connection while it had none in flight (see `woken`).
    pub async fn woken(&self) {
        self.woken.notified().await
    }

    /// The instant `ms` after this connection began.
    pub fn at(&self, ms: u64) -> Instant {
        self.epoch + Duration::from_millis(ms)
    }
}

/// The open connections, so that at the connection cap the one idle longest can be told to close
/// rather than the new one refused: holding every connection then takes keeping every one of them busy,
/// which only an authenticated client can do, and its requests and watches are limited per cluster.
#[derive(Default)]
pub struct Open {
    /// Guards the table. A std `Mutex`: held to add, remove or scan, never across an await; no other lock
    /// is taken inside.
    conns: std::sync::Mutex<Table>,
    next: AtomicU64,
}

/// Open connections by id: each one's activity, and what tells it to close.
type Table = std::collections::HashMap<u64, (Arc<Activity>, Arc<tokio::sync::Notify>)>;

/// An open connection's place in `Open`, removed when dropped.
pub struct Registered<'a> {
    open: &'a Open,
    id: u64,
    /// Notified when the connection should close (see `Open::evict_idlest`).
    pub close: Arc<tokio::sync::Notify>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.open.lock().remove(&self.id);
    }
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        // Every change under this lock is one insert or remove: nothing half-done to see.
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Add a connection, from its accept.
    pub fn add(&self, activity: Arc<Activity>) -> Registered<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let close = Arc::new(tokio::sync::Notify::new());
        self.lock().insert(id, (activity, close.clone()));
        Registered { open: self, id, close }
    }

    /// Tell a connection with nothing in flight to close: of those that never sent a request (a
    /// handshake included) the oldest, else the one idle longest; false if every open connection is
    /// busy. Connections that never send anything are what a flood without credentials makes: they
    /// make room for each other before any client's idle connection does.
    pub fn evict_idlest(&self) -> bool {
        let conns = self.lock();
        let idlest = conns
            .values()
            .filter_map(|(a, close)| {
                let s = a.snapshot();
                (s.in_flight == 0).then(|| ((s.served, a.epoch + Duration::from_millis(s.changed)), close))
            })
            .min_by_key(|(since, _)| *since);
        match idlest {
            Some((_, close)) => {
                close.notify_one();
                true
            }
            None => false,
        }
    }
}

/// A request in flight on its connection; dropped with its response body.
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl InFlight {
    /// The connection it is on.
    pub fn activity(&self) -> &Arc<Activity> {
        &self.0
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
        self.0.changed.store(self.0.now_ms(), Ordering::Relaxed);
    }
}

/// A connection's activity at one moment, in milliseconds since it began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// Now.
    pub now: u64,
    /// Requests in flight.
    pub in_flight: usize,
    /// Whether any request arrived.
    pub served: bool,
    /// When `in_flight` last changed.
    pub changed: u64,
    /// Response bytes not yet written out.
    pub outstanding: u64,
    /// When response bytes last moved.
    pub progressed: u64,
}

/// What to do with a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Keep it; look again at this time (ms since it began) unless something changes first.
    Open(u64),
    /// It never sent a request in time: close it.
    NoRequest,
    /// Nothing in flight for the idle timeout: close it gracefully (HTTP/2: GOAWAY).
    Idle,
    /// Its client has not taken a byte of what waits for it for the stall timeout: cut it.
    Stalled,
}

/// The rules, on one snapshot.
pub fn judge(s: Snapshot, t: &Timeouts) -> Verdict {
    let ms = |d: Duration| d.as_millis() as u64;
    // Before the idle rule: a response whose body has ended can still wait whole in the connection's
    // buffers for a client that stopped reading, holding its bytes and its tenant's budget.
    if s.outstanding > 0 {
        let due = s.progressed + ms(t.stalled);
        return if s.now >= due { Verdict::Stalled } else { Verdict::Open(due) };
    }
    if s.in_flight == 0 {
        let (limit, verdict) = if s.served { (t.idle, Verdict::Idle) } else { (t.first_request, Verdict::NoRequest) };
        let due = s.changed + ms(limit);
        return if s.now >= due { verdict } else { Verdict::Open(due) };
    }
    // Busy and nothing waiting to be sent (a quiet watch): nothing can fall due before bytes move.
    Verdict::Open(s.now + ms(t.stalled))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timeouts = Timeouts {
        handshake: Duration::from_secs(10),
        first_request: Duration::from_secs(10),
        idle: Duration::from_secs(90),
        stalled: Duration::from_secs(60),
    };

    fn at(now: u64) -> Snapshot {
        Snapshot { now, ..Default::default() }
    }

    #[test]
    fn a_connection_must_send_its_first_request_in_time() {
        assert_eq!(judge(at(9_999), &T), Verdict::Open(10_000));
        assert_eq!(judge(at(10_000), &T), Verdict::NoRequest);
        // A request in flight from the start is not late.
        assert_eq!(judge(Snapshot { in_flight: 1, served: true, ..at(50_000) }, &T), Verdict::Open(110_000));
    }

    #[test]
    fn idle_counts_from_the_last_request_to_end() {
        let s = Snapshot { served: true, changed: 5_000, ..at(60_000) };
        assert_eq!(judge(s, &T), Verdict::Open(95_000));
        assert_eq!(judge(Snapshot { now: 95_000, ..s }, &T), Verdict::Idle);
    }

    #[test]
    fn a_client_that_stops_reading_is_cut_and_a_quiet_one_is_not() {
        let waiting = Snapshot { in_flight: 3, served: true, outstanding: 4096, progressed: 1_000, ..at(30_000) };
        assert_eq!(judge(waiting, &T), Verdict::Open(61_000));
        assert_eq!(judge(Snapshot { now: 61_000, ..waiting }, &T), Verdict::Stalled);
        // A watch with nothing to send for an hour is fine.
        let quiet = Snapshot { outstanding: 0, ..Snapshot { now: 3_600_000, ..waiting } };
        assert_eq!(judge(quiet, &T), Verdict::Open(3_660_000));
        // A response sent whole by kgate but not taken by its client is not idle: it is cut as stalled.
        let ended = Snapshot { in_flight: 0, changed: 2_000, ..waiting };
        assert_eq!(judge(ended, &T), Verdict::Open(61_000));
        assert_eq!(judge(Snapshot { now: 61_000, ..ended }, &T), Verdict::Stalled);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_on_a_quiet_connection_wakes_its_judge() {
        let a = Activity::new();
        // Asleep until the first-request deadline, when the request comes and its bytes stall.
        assert_eq!(judge(a.snapshot(), &T), Verdict::Open(10_000));
        let r = a.begin();
        a.sent(100);
        tokio::time::timeout(Duration::from_millis(1), a.woken()).await.expect("not woken by the first request");
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(judge(a.snapshot(), &T), Verdict::Stalled);
        // A second request while one is in flight changes no deadline: no wakeup.
        let r2 = a.begin();
        assert!(tokio::time::timeout(Duration::from_millis(1), a.woken()).await.is_err());
        drop((r, r2));
    }

    #[tokio::test(start_paused = true)]
    async fn activity_tracks_requests_and_bytes() {
        let a = Activity::new();
        tokio::time::advance(Duration::from_secs(3)).await;
        let r = a.begin();
        a.sent(100);
        let s = a.snapshot();
        assert_eq!((s.in_flight, s.served, s.outstanding, s.progressed), (1, true, 100, 3_000));
        tokio::time::advance(Duration::from_secs(2)).await;
        a.written(100);
        drop(r);
        let s = a.snapshot();
        assert_eq!((s.in_flight, s.outstanding, s.changed, s.progressed), (0, 0, 5_000, 5_000));
        assert_eq!(judge(s, &T), Verdict::Open(95_000));
    }
}
