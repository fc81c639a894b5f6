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

use std::hash::{BuildHasher, BuildHasherDefault};

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

/// A key's identity in [`Sent`]: 64 bits of a fixed hash, the same in every feed.
pub(super) fn key_hash(key: &str) -> u64 {
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(key)
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
    /// the caller sends it or filters it out. Events arrive in revision order, and within one
    /// revision in one order whatever the feed, but a replay may overlap what was sent.
    pub(super) fn admit(&mut self, rev: Revision, key: u64) -> bool {
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
            self.start(rev);
            self.whole = true;
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

    /// A transaction's events split by a resume: the replay from just before its revision sends only
    /// what the client lacks, once.
    #[test]
    fn a_resume_inside_one_revision_sends_the_rest_of_it_once() {
        let mut s = Sent::complete(10);
        assert!(!s.admit(10, key_hash("/a")), "the start revision is the client's");
        assert!(s.admit(11, key_hash("/a")));
        assert!(s.admit(11, key_hash("/b")));
        assert_eq!(s.resume_after(), 10, "resume from before the revision the client has part of");
        // The replay: the whole of revision 11, then what came after.
        let replay = [(11, "/a"), (11, "/b"), (11, "/c"), (12, "/a")];
        let sent: Vec<_> = replay.iter().filter(|(r, k)| s.admit(*r, key_hash(k))).copied().collect();
        assert_eq!(sent, [(11, "/c"), (12, "/a")]);
        assert!(!s.admit(11, key_hash("/d")), "an older revision than the last is never sent");
    }

    #[test]
    fn a_whole_revision_is_claimed_and_then_nothing_more_at_it_is_sent() {
        let mut s = Sent::complete(5);
        assert!(s.admit(7, key_hash("/a")));
        assert!(s.is_partial());
        s.complete_to(7);
        assert!(!s.is_partial());
        assert_eq!(s.resume_after(), 7);
        assert!(!s.admit(7, key_hash("/b")), "a bookmark at 7 said the client had all of 7");
        s.complete_to(6);
        assert_eq!(s.last(), 7, "a claim never moves back");
        assert!(s.admit(8, key_hash("/b")));
    }

    #[test]
    fn a_feed_past_a_revision_with_nothing_sent_at_it_replays_that_revision() {
        let mut s = Sent::complete(5);
        s.seen(9);
        assert_eq!((s.last(), s.resume_after()), (9, 8));
        assert!(s.admit(9, key_hash("/a")), "an event at 9 the store watch had not yet given");
        s.seen(9);
        assert!(!s.admit(9, key_hash("/a")), "seeing 9 again forgets nothing");
        s.seen(3);
        assert_eq!(s.last(), 9);
    }

    /// Many keys at one revision, then a revision of one: every key of the first counted once, and
    /// the room they took let go.
    #[test]
    fn a_large_transaction_is_counted_key_by_key_and_its_room_let_go() {
        let mut s = Sent::complete(1);
        let keys: Vec<u64> = (0..100).map(|i| key_hash(&format!("/k{i}"))).collect();
        assert!(keys.iter().all(|k| s.admit(2, *k)));
        assert!(keys.iter().all(|k| !s.admit(2, *k)), "each once");
        assert!(s.admit(3, keys[0]));
        assert!(s.more.capacity() <= KEEP, "{}", s.more.capacity());
        assert!(s.admit(3, keys[1]), "another key at the new revision");
    }
}
