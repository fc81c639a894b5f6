//! Which etcd members take kgate's requests: each member is read through a connection of its own
//! every `ROUND`, and one that does not answer while another does is taken out of the client's
//! balancer until it answers again.
//!
//! The balancer alone cannot tell a frozen member (a stopped process, a paused VM, a partition that
//! drops packets) from a busy one: its connection stays open, so requests keep going to it and each
//! waits out its deadline, and a watch on it is silent until HTTP/2 keepalive gives up on the
//! connection (15 s). On three members with one frozen, kgate acknowledged about 8 creates a second
//! instead of hundreds, and its watch missed 12 s of events. etcd's own Go client once guarded
//! against this too (its health balancer marked an endpoint unhealthy on failure and skipped it for
//! a while).
//!
//! The probe is a linearizable read, which a member answers only while it follows a leader that a
//! quorum follows: a partitioned member fails it too. During an election every member fails it, and
//! then nobody is taken out: a member leaves only when another member in the balancer answered the
//! same round, so the balancer never runs out of members that answer, and never more than a
//! minority of the members is out. Watches are told when a member leaves (`Members::left`), since
//! nothing says which member carries a watch: each asks etcd for progress on its stream and reopens
//! it from its last revision, on the members left, only if no answer comes (reopening every quiet
//! watch would send those whose last revision has since been compacted back to a list).

use std::time::Duration;

use etcd_client::{Client, ConnectOptions, KvClient};

use super::HEALTH_KEY;

/// How often every member is read (a round waits for the slowest answer, up to `ANSWER`).
const ROUND: Duration = Duration::from_secs(1);
/// How long a member has to answer its read; a loaded member answers one in milliseconds.
const ANSWER: Duration = Duration::from_secs(1);
/// Rounds in a row a member must miss before it is taken out: one slow read is not a frozen member.
const OUT_AFTER: i32 = 2;
/// Rounds in a row a member taken out must answer before it takes requests again: a member that
/// answers only now and then would otherwise leave and come back every few rounds, and each time it
/// leaves every watch checks its stream.
const BACK_AFTER: i32 = 2;

/// The members' watcher: its task ends when this is dropped.
pub(super) struct Members {
    /// Counts the members taken out so far; watches reopen when it moves.
    left: tokio::sync::watch::Receiver<u64>,
    /// The task that reads the members (none with a single member), aborted on drop.
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Members {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

impl Members {
    /// Watch `endpoints` (as `client` was connected with them, scheme included) and take a member
    /// out of `client`'s balancer while it does not answer; one member is never taken out.
    pub(super) async fn start(
        client: Client,
        endpoints: &[String],
        options: &ConnectOptions,
    ) -> Result<Members, etcd_client::Error> {
        let (tx, left) = tokio::sync::watch::channel(0);
        if endpoints.len() < 2 {
            // Nothing to take out; the sender goes, and `left` never moves.
            return Ok(Members { left, task: None });
        }
        let mut probes = Vec::with_capacity(endpoints.len());
        for e in endpoints {
            // Connected lazily: a member down at start is simply out of the first rounds.
            probes.push(Client::connect([e], Some(options.clone())).await?.kv_client());
        }
        let endpoints = endpoints.to_vec();
        let task = tokio::spawn(watch_members(client, endpoints, probes, tx));
        Ok(Members { left, task: Some(task) })
    }

    /// A receiver that sees each member taken out from now on.
    pub(super) fn left(&self) -> tokio::sync::watch::Receiver<u64> {
        let mut r = self.left.clone();
        r.borrow_and_update();
        r
    }
}

/// Read every member each round; take out or put back those the round says.
async fn watch_members(
    client: Client,
    endpoints: Vec<String>,
    probes: Vec<KvClient>,
    left: tokio::sync::watch::Sender<u64>,
) {
    let mut out = vec![false; endpoints.len()];
    // Per member, the rounds in a row it answered (positive) or missed (negative).
    let mut streaks = vec![0i32; endpoints.len()];
    loop {
        let round = tokio::time::Instant::now();
        let answers = futures::future::join_all(probes.iter().map(|kv| {
            let mut kv = kv.clone();
            async move { matches!(tokio::time::timeout(ANSWER, kv.get(HEALTH_KEY, None)).await, Ok(Ok(_))) }
        }))
        .await;
        for (streak, answered) in streaks.iter_mut().zip(&answers) {
            *streak = match (*answered, *streak > 0) {
                (true, true) => streak.saturating_add(1),
                (true, false) => 1,
                (false, true) => -1,
                (false, false) => streak.saturating_sub(1),
            };
        }
        for (i, change) in changes(&streaks, &out).into_iter().enumerate() {
            let endpoint = &endpoints[i];
            match change {
                Change::Keep => {}
                Change::TakeOut => {
                    if let Err(e) = client.remove_endpoint(endpoint).await {
                        tracing::warn!(error = %e, endpoint, "could not take an etcd member out of the balancer");
                        continue;
                    }
                    out[i] = true;
                    tracing::warn!(
                        endpoint,
                        "an etcd member did not answer while others did; requests and watches move to the others"
                    );
                    left.send_modify(|n| *n += 1);
                }
                Change::PutBack => {
                    if let Err(e) = client.add_endpoint(endpoint).await {
                        tracing::warn!(error = %e, endpoint, "could not put an etcd member back in the balancer");
                        continue;
                    }
                    out[i] = false;
                    tracing::info!(endpoint, "an etcd member answers again; it takes requests again");
                }
            }
        }
        tokio::time::sleep_until(round + ROUND).await;
    }
}

/// What a round does to one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Change {
    Keep,
    TakeOut,
    PutBack,
}

/// The changes a round calls for, given each member's streak up to this round (the rounds in a row
/// it answered, or missed as a negative count) and which members are `out` now.
///
/// A member out comes back once it has answered `BACK_AFTER` rounds in a row, or at its first
/// answer if no member in answered. A member in that missed `OUT_AFTER` rounds leaves if another
/// member in answered this one, so that the balancer keeps one that answers; and no more than a
/// minority is ever out, the longest silent first: a member that answers a linearizable read shows
/// a quorum alive, so with more silent than a minority some are slow, not gone, and taking them out
/// too would put all the load on the rest.
fn changes(streaks: &[i32], out: &[bool]) -> Vec<Change> {
    let answered_in = |except: Option<usize>| {
        streaks.iter().zip(out).enumerate().any(|(j, (&s, &o))| Some(j) != except && s > 0 && !o)
    };
    let mut changes: Vec<Change> = streaks
        .iter()
        .zip(out)
        .map(|(&streak, &out)| match (streak, out) {
            (n, true) if n >= BACK_AFTER || (n > 0 && !answered_in(None)) => Change::PutBack,
            _ => Change::Keep,
        })
        .collect();
    let still_out = out.iter().zip(&changes).filter(|(o, c)| **o && **c != Change::PutBack).count();
    let mut room = (streaks.len().saturating_sub(1) / 2).saturating_sub(still_out);
    let mut silent: Vec<usize> =
        (0..streaks.len()).filter(|&i| !out[i] && streaks[i] <= -OUT_AFTER && answered_in(Some(i))).collect();
    silent.sort_by_key(|&i| streaks[i]);
    for i in silent {
        if room == 0 {
            break;
        }
        changes[i] = Change::TakeOut;
        room -= 1;
    }
    changes
}

#[cfg(test)]
mod tests {
    use super::Change::*;
    use super::*;

    #[test]
    fn a_member_leaves_only_while_another_answers_and_comes_back_once_it_answers_again() {
        let quiet = -OUT_AFTER;
        // A frozen member, the others electing or serving: one miss is a slow read, two are out.
        assert_eq!(changes(&[-1, 1, 5], &[false; 3]), [Keep, Keep, Keep]);
        assert_eq!(changes(&[quiet, 1, 5], &[false; 3]), [TakeOut, Keep, Keep]);
        // An election: nobody answers, nobody leaves (the balancer keeps every member).
        assert_eq!(changes(&[quiet, quiet, -5], &[false; 3]), [Keep, Keep, Keep]);
        // Out and still silent: stays out. Out and answering: back on its second round in a row.
        assert_eq!(changes(&[-9, 3, 3], &[true, false, false]), [Keep, Keep, Keep]);
        assert_eq!(changes(&[1, 3, 3], &[true, false, false]), [Keep, Keep, Keep]);
        assert_eq!(changes(&[BACK_AFTER, 3, 3], &[true, false, false]), [PutBack, Keep, Keep]);
        // Two of three silent while one answers: a quorum is alive, so one of them is only slow.
        // The longer silent leaves, the other stays; and while one is out, no other leaves.
        assert_eq!(changes(&[quiet, quiet - 3, 1], &[false; 3]), [Keep, TakeOut, Keep]);
        assert_eq!(changes(&[quiet - 3, quiet, 1], &[false, true, false]), [Keep, Keep, Keep]);
        // Of five, two may be out at once.
        assert_eq!(changes(&[quiet, quiet, quiet, 1, 1], &[false; 5]), [TakeOut, TakeOut, Keep, Keep, Keep]);
        // The only one answering is out: it comes back at once, and the silent ones stay until the
        // next round, when one that answers is in.
        assert_eq!(changes(&[quiet, quiet, 1], &[false, false, true]), [Keep, Keep, PutBack]);
        assert_eq!(changes(&[quiet - 1, quiet - 1, 2], &[false; 3]), [TakeOut, Keep, Keep]);
        // One member or two: never taken out (two members need both for a quorum).
        assert_eq!(changes(&[-9], &[false]), [Keep]);
        assert_eq!(changes(&[-9, 4], &[false, false]), [Keep, Keep]);
    }
}
