//! How far one watch's client has got, to the event: what a resume, a bookmark or the watch's end
//! may claim without dropping or repeating any of one transaction's events.
//!
//! A store transaction writing several keys (a new cluster's objects, a purge's or a move's batch)
//! makes several events at one revision. A revision alone then cannot say where the client is: a
//! watch that falls behind after sending some of them and resumes "after" that revision drops the
//! rest, and a bookmark or an object's resourceVersion at that revision tells the client it has them
//! all. So a watch remembers which keys it has passed at its last revision until that revision is
//! known to be whole, resumes from just before it while it is not, and claims it only once it is.
//! (A client that reconnects by itself from an object's resourceVersion in the middle of such a
//! revision still misses the rest: kube's resourceVersions cannot say more. kgate's transactions of
//! many keys are its own: a new cluster's bootstrap, a purge, a move.)

use std::hash::{BuildHasher, RandomState};
use std::sync::OnceLock;

use crate::storage::Revision;

/// The client's position in the stream of changes.
#[derive(Debug)]
pub(super) struct Sent {
    /// The highest revision the client has any event of (or all of: a list's, a bookmark's).
    last: Revision,
    /// Whether the client has every event at `last`.
    whole: bool,
    /// While `last` is not whole: the keys (hashed) of its events already passed, sent or filtered
    /// out. The first is kept apart because most revisions change one key: a list would cost every
    /// watcher an allocation for every event.
    first: Option<u64>,
    more: Vec<u64>,
}

/// Keys of one revision a watcher keeps room for once they are passed; a larger list is let go.
const KEEP: usize = 16;

/// A key's identity in [`Sent`]: 64 bits of a hash keyed once per process, the same in every feed.
/// Keyed at random, so a tenant cannot choose two names that collide (the second's event would be
/// taken for the first's and skipped).
pub(super) fn key_hash(key: &str) -> u64 {
    static KEYS: OnceLock<RandomState> = OnceLock::new();
    KEYS.get_or_init(RandomState::new).hash_one(key)
}

impl Sent {
    /// A client that has everything up to `rev`, and nothing after.
    pub(super) fn complete(rev: Revision) -> Self {
        Sent { last: rev, whole: true, first: None, more: Vec::new() }
    }

    /// The highest revision the client has events of.
    pub(super) fn last(&self) -> Revision {
        self.last
    }

    /// Whether the client may lack events at [`Sent::last`].
    pub(super) fn is_partial(&self) -> bool {
        !self.whole
    }

    /// Whether the event at `rev` for `key` is new to the client: it is then counted as passed, and
    /// the caller sends it or filters it out. Events arrive in revision order, but a replay may
    /// overlap what was sent. `ends` says the event is its revision's last (both feeds tell, from
    /// the events that arrive together): once it is passed the client has all of that revision.
    pub(super) fn admit(&mut self, rev: Revision, key: u64, ends: bool) -> bool {
        let new = self.passed(rev, key);
        if ends && rev == self.last {
            self.complete_to(rev);
        }
        new
    }

    fn passed(&mut self, rev: Revision, key: u64) -> bool {
        match rev.cmp(&self.last) {
            std::cmp::Ordering::Less => false,
            std::cmp::Ordering::Equal if self.whole || self.first == Some(key) || self.more.contains(&key) => false,
            std::cmp::Ordering::Equal => {
                match self.first {
                    None => self.first = Some(key),
                    Some(_) => self.more.push(key),
                }
                true
            }
            std::cmp::Ordering::Greater => {
                self.start(rev);
                self.first = Some(key);
                true
            }
        }
    }

    /// `rev` is the new last revision, none of whose keys have been passed yet.
    fn start(&mut self, rev: Revision) {
        self.last = rev;
        self.whole = false;
        self.first = None;
        if self.more.capacity() > KEEP {
            self.more = Vec::new();
        } else {
            self.more.clear();
        }
    }

    /// The client has everything up to `rev` (never moves back).
    pub(super) fn complete_to(&mut self, rev: Revision) {
        if rev >= self.last {
            (self.last, self.whole, self.first) = (rev, true, None);
            // A whole revision needs no list: an idle watcher holds no memory for one.
            self.more = Vec::new();
        }
    }

    /// A feed seen to be past everything up to `rev` with nothing for this client at `rev` yet (a
    /// store watch's revision: its events at `rev` may be still coming, and were filtered out so far).
    pub(super) fn seen(&mut self, rev: Revision) {
        if rev > self.last {
            self.start(rev);
        }
    }

    /// The revision a new feed starts after so that the client misses nothing: the one before `last`
    /// while `last` may be partial (what the client has of it is then skipped by [`Sent::admit`]).
    pub(super) fn resume_after(&self) -> Revision {
        if self.whole {
            self.last
        } else {
            self.last - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admit(s: &mut Sent, rev: Revision, key: &str) -> bool {
        s.admit(rev, key_hash(key), false)
    }

    /// A transaction's events split by a resume: the replay from just before its revision sends only
    /// what the client lacks, once.
    #[test]
    fn a_resume_inside_one_revision_sends_the_rest_of_it_once() {
        let mut s = Sent::complete(10);
        assert!(!admit(&mut s, 10, "/a"), "the start revision is the client's");
        assert!(admit(&mut s, 11, "/a"));
        assert!(admit(&mut s, 11, "/b"));
        assert_eq!(s.resume_after(), 10, "resume from before the revision the client has part of");
        // The replay: the whole of revision 11 (its last event says so), then what came after.
        let replay = [(11, "/a", false), (11, "/b", false), (11, "/c", true), (12, "/a", true)];
        let sent: Vec<_> =
            replay.iter().filter(|(r, k, e)| s.admit(*r, key_hash(k), *e)).map(|(r, k, _)| (*r, *k)).collect();
        assert_eq!(sent, [(11, "/c"), (12, "/a")]);
        assert!(!admit(&mut s, 11, "/d"), "an older revision than the last is never sent");
        assert!(!s.is_partial(), "12's last event was passed");
        assert_eq!(s.resume_after(), 12);
    }

    /// The last event of a revision, sent or replayed as a duplicate, makes the revision whole, and
    /// the list of keys goes with it.
    #[test]
    fn a_revisions_last_event_makes_it_whole() {
        let mut s = Sent::complete(1);
        assert!(admit(&mut s, 2, "/a"));
        assert!(s.admit(2, key_hash("/b"), true));
        assert!(!s.is_partial());
        assert_eq!(s.more.capacity(), 0, "a whole revision holds no list");
        assert!(!admit(&mut s, 2, "/c"), "nothing more at a whole revision");
        let mut r = Sent::complete(1);
        assert!(admit(&mut r, 2, "/a"));
        assert!(!r.admit(2, key_hash("/a"), true), "a duplicate that ends the revision");
        assert!(!r.is_partial(), "still ends it");
    }

    #[test]
    fn a_whole_revision_is_claimed_and_then_nothing_more_at_it_is_sent() {
        let mut s = Sent::complete(5);
        assert!(admit(&mut s, 7, "/a"));
        assert!(s.is_partial());
        s.complete_to(7);
        assert!(!s.is_partial());
        assert_eq!(s.resume_after(), 7);
        assert!(!admit(&mut s, 7, "/b"), "a bookmark at 7 said the client had all of 7");
        s.complete_to(6);
        assert_eq!(s.last(), 7, "a claim never moves back");
        assert!(admit(&mut s, 8, "/b"));
    }

    #[test]
    fn a_feed_past_a_revision_with_nothing_sent_at_it_replays_that_revision() {
        let mut s = Sent::complete(5);
        s.seen(9);
        assert_eq!((s.last(), s.resume_after()), (9, 8));
        assert!(admit(&mut s, 9, "/a"), "an event at 9 the store watch had not yet given");
        s.seen(9);
        assert!(!admit(&mut s, 9, "/a"), "seeing 9 again forgets nothing");
        s.seen(3);
        assert_eq!(s.last(), 9);
    }

    /// Many keys at one revision, then a revision of one: every key of the first counted once, and
    /// the room they took let go.
    #[test]
    fn a_large_transaction_is_counted_key_by_key_and_its_room_let_go() {
        let mut s = Sent::complete(1);
        let keys: Vec<u64> = (0..100).map(|i| key_hash(&format!("/k{i}"))).collect();
        assert!(keys.iter().all(|k| s.admit(2, *k, false)));
        assert!(keys.iter().all(|k| !s.admit(2, *k, false)), "each once");
        assert!(s.admit(3, keys[0], false));
        assert!(s.more.capacity() <= KEEP, "{}", s.more.capacity());
        assert!(s.admit(3, keys[1], false), "another key at the new revision");
    }
}
