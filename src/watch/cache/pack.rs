//! Packing: the cached objects' JSON copied, in key order, into shared blocks, so that a list reads a
//! few runs of memory instead of one allocation per object wherever the allocator happened to put it.
//!
//! Objects enter the cache one write at a time, each in an allocation of its own among whatever else
//! the server allocated meanwhile (watch events, requests). A list across clusters then reads 10,000
//! allocations spread over the heap: after the fan-out bench's writes, copying them into the answer
//! took a third of kgate's CPU per list, against a fifth when the same objects had been written in a
//! row. Each body in a block follows a comma and the cache's `Head`, so that a run of them is the
//! list's items exactly as they are sent: a list across clusters hands a run of 16 KiB or more to the
//! connection as one slice of the block, and the only copy of those bytes left is the one TLS makes
//! while encrypting (copying them into the answer had been a fifth of kgate's CPU per list, even
//! packed). The head is that of the definition that started the cache; a list served with another
//! (a custom resource in another version) finds no such runs and copies, as before. The separator
//! costs a few dozen bytes per object.
//!
//! Each step of a pass also indexes the runs its span holds (`Runs`), and a write forgets the run it
//! falls in, so a list across clusters sends each indexed run without looking at its objects: it walks
//! only the objects written since, between the runs.
//!
//! A pass is due once a cache of at least [`MIN_OBJECTS`] objects has taken half as many writes as
//! it has objects since the last one, or has just been loaded; a list across every cluster starts it (those lists are what it
//! serves: a type nobody lists whole, such as Leases renewed every few seconds, is never copied). The
//! pass copies the bodies in key order into blocks of [`BLOCK`] bytes, one block per step, leaves alone
//! a step's objects that already lie in one run, and swaps in each copy whose object has not been
//! written since it was copied (a later write always wins). It yields between steps, so the ingest task
//! and readers wait for at most one step's swap and index of at most [`STEP_OBJECTS`] objects.
//!
//! Memory: a block is freed once none of its objects is referenced. The map references the current
//! blocks; a list across clusters still reading its snapshot keeps the blocks of its time, as it would
//! keep the old objects without packing. A tenant's list and a watch's initial objects hold references
//! too, and are charged for each whole block they keep (see `budget`); an event's previous object in
//! the history takes a copy, so the history never keeps a block of other objects alive. A block's dead
//! part is what was written since the pass that made it; the next pass moves the live objects of a
//! block that thinned.
//! A body in a block has no allocation of its own: no allocator header and no spare capacity from
//! growing while it was serialised.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::{Cacher, Entry, Objects, State};

/// Bytes per block: one step copies at most this much.
const BLOCK: usize = 256 * 1024;
/// Objects per step at most (large ones included), which bounds the swap and the index under the write
/// lock whatever their size.
const STEP_OBJECTS: usize = 1024;
/// Objects larger than this keep their own allocation: each is one run of memory already.
const LARGE: usize = BLOCK / 8;
/// Caches smaller than this are not packed: so few objects are read quickly wherever they lie.
const MIN_OBJECTS: usize = 1024;

/// Whether a pass is due, `written` writes after the last began, in a cache of `objects` objects.
pub(super) fn due(objects: usize, written: usize) -> bool {
    objects >= MIN_OBJECTS && written >= objects / 2
}

/// An object's body copied into a block, and what it was copied from.
struct Moved {
    key: Arc<str>,
    /// The copy, with the entry's revision.
    entry: Entry,
    /// Address of the body it was copied from: the map still holds that body if and only if the object
    /// was not written since (the step's snapshot keeps it alive, so the address cannot be reused).
    from: usize,
}

fn address(e: &Entry) -> usize {
    e.body().as_ptr() as usize
}

/// Copy the bodies of the objects from `start` on into one block, in key order, each after `sep` (a
/// comma and the cache's `Head`, so that a run of them is a list's items as they are sent), unless they
/// already lie so; returns the copies and the key the next step starts at (`None` after the last).
fn step(objects: &Objects, start: Option<&Arc<str>>, sep: &[u8]) -> (Vec<Moved>, Option<Arc<str>>) {
    let lower = start.map_or(Bound::Unbounded, |k| Bound::Included(&**k));
    let mut picked: Vec<(&Arc<str>, &Entry)> = Vec::new();
    let (mut size, mut next, mut one_run) = (0, None, true);
    for (visited, (key, entry)) in objects.range::<_, str>((lower, Bound::Unbounded)).enumerate() {
        if visited == STEP_OBJECTS {
            next = Some(key.clone());
            break;
        }
        if entry.body().len() > LARGE {
            continue;
        }
        let n = sep.len() + entry.body().len();
        if size + n > BLOCK {
            next = Some(key.clone());
            break;
        }
        one_run &= match picked.last() {
            Some((_, last)) => entry.follows(last, sep),
            None => entry.after(sep),
        };
        size += n;
        picked.push((key, entry));
    }
    if one_run {
        return (Vec::new(), next);
    }
    let mut block = Vec::with_capacity(size);
    let mut at = Vec::with_capacity(picked.len());
    for (_, entry) in &picked {
        block.extend_from_slice(sep);
        at.push(block.len());
        block.extend_from_slice(entry.body());
    }
    let block = Bytes::from(block);
    let moved = picked
        .into_iter()
        .zip(at)
        .map(|((key, entry), at)| Moved {
            key: key.clone(),
            entry: Entry { block: block.clone(), at: at as u32, len: entry.len, revision: entry.revision },
            from: address(entry),
        })
        .collect();
    (moved, next)
}

/// Swap in the copies whose objects are unchanged; returns the others, to be dropped after the lock
/// (the last references to a block may be among them).
fn swap(st: &mut State, moved: Vec<Moved>) -> Vec<Moved> {
    let mut stale = Vec::new();
    for m in moved {
        // `get` first: `get_mut` copies the path to the object (the map is shared with the step's
        // snapshot), which is wasted when nothing is swapped.
        let unchanged =
            st.objects.get::<str>(&m.key).is_some_and(|e| address(e) == m.from && e.revision == m.entry.revision);
        match unchanged.then(|| st.objects.get_mut::<str>(&m.key)).flatten() {
            Some(current) => {
                *current = m.entry;
                st.packed = true;
            }
            None => stale.push(m),
        }
    }
    stale
}

/// The runs of packed objects in the map, by the key of each run's first object, so that a list across
/// clusters sends each run as it is without walking its objects. Walking the map (a cache miss on each
/// leaf of 16 entries) cost such a list a sixth of its CPU once the bodies went out uncopied: 2.7 ms of
/// CPU per list of 10,000 objects with the walk, 2.2-2.4 ms without, in interleaved runs.
///
/// A run here is always its objects in the map as they are: the span from its first key to its last
/// holds exactly the run's objects, each unchanged since it was indexed. A write to any key in a span
/// (a change, a new object between two of its objects, a delete) forgets the run (`forget`); each pass
/// step indexes its span afresh under the lock of its swap (`index`). So the index never keeps a block
/// alive by itself: an object leaves its block only by a write or a swap, and either drops the run.
/// Cloned with the map, in constant time, into each snapshot of the whole cache taken for a list.
#[derive(Clone)]
pub struct Runs {
    /// What precedes each body in a block: a comma and the cache's `Head`.
    sep: Bytes,
    by_first: imbl::OrdMap<Arc<str>, Run>,
}

/// Objects lying in a row in one block, and in the map.
#[derive(Clone)]
pub struct Run {
    /// Key of its last object.
    pub last: Arc<str>,
    /// The separator and a body, for each object in key order (a list's items as they are sent).
    pub bytes: Bytes,
}

impl Runs {
    /// No runs, for blocks with `sep` before each body.
    pub(super) fn new(sep: Bytes) -> Runs {
        Runs { sep, by_first: imbl::OrdMap::new() }
    }

    /// What precedes each body in the cache's blocks.
    pub fn sep(&self) -> &[u8] {
        &self.sep
    }

    /// The first run at or after `from`.
    pub fn first_from(&self, from: Bound<&str>) -> Option<(&Arc<str>, &Run)> {
        self.by_first.range::<_, str>((from, Bound::Unbounded)).next()
    }

    /// How many runs there are.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.by_first.len()
    }

    pub(super) fn clear(&mut self) {
        self.by_first = imbl::OrdMap::new();
    }

    /// Forget the run whose span holds `key`, before a write to `key`.
    pub(super) fn forget(&mut self, key: &str) {
        let first = match self.by_first.get_prev(key) {
            Some((first, run)) if *run.last >= *key => first.clone(),
            _ => return,
        };
        self.by_first.remove(&first);
    }

    /// Index afresh the runs `objects` hold from `lower` to before `upper` (a pass step's span, after
    /// its swap): runs that reach into the span are forgotten, and each row of objects lying one after
    /// the other in a block becomes a run.
    pub(super) fn index(&mut self, objects: &Objects, lower: Option<&Arc<str>>, upper: Option<&Arc<str>>) {
        let upper_bound = upper.map_or(Bound::Unbounded, |k| Bound::Excluded(&**k));
        let reaching: Vec<Arc<str>> = self
            .by_first
            .range::<_, str>((Bound::Unbounded, upper_bound))
            .rev()
            .take_while(|(_, run)| lower.is_none_or(|l| run.last >= *l))
            .map(|(first, _)| first.clone())
            .collect();
        for first in reaching {
            self.by_first.remove(&first);
        }
        let lower_bound = lower.map_or(Bound::Unbounded, |k| Bound::Included(&**k));
        // The row being gathered: its first and last object, with their keys.
        let mut row: Option<(Keyed, Keyed)> = None;
        let mut rows = Vec::new();
        for (key, entry) in objects.range::<_, str>((lower_bound, upper_bound)) {
            if let Some((_, last)) = &mut row {
                if entry.follows(last.1, &self.sep) {
                    *last = (key, entry);
                    continue;
                }
            }
            rows.extend(row.take());
            if entry.after(&self.sep) {
                row = Some(((key, entry), (key, entry)));
            }
        }
        rows.extend(row);
        for ((first_key, first), (last_key, last)) in rows {
            let run = Run { last: last_key.clone(), bytes: Entry::run(first, last, &self.sep) };
            self.by_first.insert(first_key.clone(), run);
        }
    }
}

/// An object and its key.
type Keyed<'a> = (&'a Arc<str>, &'a Entry);

/// Clears the cache's `packing` when the pass ends, however it ends.
struct Packing(Arc<Cacher>);

impl Drop for Packing {
    fn drop(&mut self) {
        self.0.lock_write().packing = false;
    }
}

/// One pass over the cache, a block at a time (the caller has set `packing`).
pub(super) async fn pass(cacher: Arc<Cacher>) {
    let sep = cacher.lock_read().runs.sep.clone();
    let packing = Packing(cacher);
    let mut start = None;
    loop {
        let objects = packing.0.lock_read().objects.clone();
        let (moved, next) = step(&objects, start.as_ref(), &sep);
        let copied = moved.len();
        let stale = {
            let mut st = packing.0.lock_write();
            let stale = swap(&mut st, moved);
            // Under the same lock: no write may fall between the swap and the index of its span.
            let st = &mut *st;
            st.runs.index(&st.objects, start.as_ref(), next.as_ref());
            stale
        };
        let swapped = (copied - stale.len()) as u64;
        packing.0.metrics.packed.with_label_values(&[packing.0.def.metric_label()]).inc_by(swapped);
        // Only now: until the swap, every body copied must stay allocated (see `Moved::from`).
        drop((stale, objects));
        match next {
            Some(key) => start = Some(key),
            None => return,
        }
        tokio::task::yield_now().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::cache::Scope;

    /// A map of `n` objects; object `i`'s body is `size(i)` bytes.
    fn objects(n: usize, size: impl Fn(usize) -> usize) -> Objects {
        (0..n)
            .map(|i| {
                let body = Bytes::from(vec![b'a' + (i % 26) as u8; size(i)]);
                (Arc::<str>::from(format!("/k/{i:06}")), entry(body, i as i64 + 1))
            })
            .collect()
    }

    fn entry(body: impl Into<Bytes>, revision: i64) -> Entry {
        Entry::own(body.into(), revision).unwrap()
    }

    /// What precedes each body in a block of the test caches (ConfigMaps).
    const SEP: &[u8] = br#",{"apiVersion":"v1","kind":"ConfigMap""#;

    fn cacher(objects: Objects) -> Arc<Cacher> {
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().cache;
        let c = Cacher::new(def, "/k/".into(), metrics, Arc::default());
        c.lock_write().objects = objects;
        c
    }

    /// A step copies bodies in key order into one run of at most a block, each unchanged in content
    /// and revision, passes over large ones, and names where the next step starts; a step whose
    /// objects already lie in one run copies nothing.
    #[test]
    fn a_step_copies_bodies_in_key_order_into_one_block() {
        let map = objects(4000, |i| [300, 500, LARGE + 1, 120][i % 4]);
        let (moved, next) = step(&map, None, SEP);
        let next = next.expect("4000 objects are more than a block");
        let total: usize = moved.iter().map(|m| SEP.len() + m.entry.body().len()).sum();
        assert!(total <= BLOCK && total + 500 > BLOCK, "a step fills its block: {total} bytes");
        assert!(moved[0].entry.after(SEP));
        for pair in moved.windows(2) {
            assert!(pair[0].key < pair[1].key, "key order");
            assert!(pair[1].entry.follows(&pair[0].entry, SEP), "one run, each body after the separator");
        }
        let (first, last) = (&moved[0].entry, &moved[moved.len() - 1].entry);
        let run = Entry::run(first, last, SEP);
        let want: Vec<u8> = moved.iter().flat_map(|m| [SEP, m.entry.body()].concat()).collect();
        assert!(run == want, "a run is the separator and a body, repeated");
        for m in &moved {
            let original = map.get(&m.key).unwrap();
            assert_eq!((m.entry.body(), m.entry.revision), (original.body(), original.revision));
            assert_eq!(m.from, address(original));
        }
        assert!(moved.iter().all(|m| *m.key < *next), "the next step starts after this one");
        let before_next: Vec<_> = map.range::<_, str>((Bound::Unbounded, Bound::Excluded(&*next))).collect();
        let large = before_next.iter().filter(|(_, e)| e.body().len() > LARGE).count();
        assert!(large > 0);
        assert_eq!(before_next.len() - moved.len(), large, "only the large objects are left where they are");

        // The copies, as a pass leaves them: one run already.
        let packed: Objects = moved.into_iter().map(|m| (m.key, m.entry)).collect();
        let (again, rest) = step(&packed, None, SEP);
        assert!(again.is_empty() && rest.is_none(), "nothing to copy");
        // Bodies that lie in a row but without the separator (as a tenant's copies might) are copied.
        let bare = Bytes::from(vec![b'x'; 300]);
        let unseparated: Objects =
            (0..3).map(|i| (Arc::from(format!("/k/{i}")), entry(bare.slice(i * 100..(i + 1) * 100), 1))).collect();
        assert_eq!(step(&unseparated, None, SEP).0.len(), 3);
    }

    /// Small objects come at most `STEP_OBJECTS` to a step, however few bytes they are.
    #[test]
    fn a_step_takes_a_bounded_number_of_objects() {
        let map = objects(3 * STEP_OBJECTS, |_| 10);
        let (moved, next) = step(&map, None, SEP);
        assert_eq!(moved.len(), STEP_OBJECTS);
        assert_eq!(next.as_deref(), Some(format!("/k/{STEP_OBJECTS:06}").as_str()));
    }

    /// A copy goes in only over the very entry it was copied from: not over a newer write, not over a
    /// reload's entry of the same revision, and not back after a delete.
    #[test]
    fn a_swap_never_undoes_a_change() {
        let c = cacher(objects(10, |_| 100));
        let snapshot = c.lock_read().objects.clone();
        let (moved, _) = step(&snapshot, None, SEP);
        assert_eq!(moved.len(), 10);
        let key = |i: usize| -> Arc<str> { format!("/k/{i:06}").into() };
        {
            let mut st = c.lock_write();
            st.set(key(1), entry(&b"newer"[..], 100));
            st.set(key(2), entry(&b"reloaded"[..], 3));
            st.delete(&key(3));
        }
        let stale = swap(&mut c.lock_write(), moved);
        assert_eq!(stale.iter().map(|m| m.key.clone()).collect::<Vec<_>>(), [key(1), key(2), key(3)]);
        let st = c.lock_read();
        assert!(st.packed);
        assert_eq!((st.objects[&key(1)].body(), st.objects[&key(1)].revision), (&b"newer"[..], 100));
        assert_eq!(st.objects[&key(2)].body(), b"reloaded");
        assert!(!st.objects.contains_key(&key(3)));
        for i in [0, 4, 5, 9] {
            let (now, then) = (&st.objects[&key(i)], &snapshot[&key(i)]);
            assert_eq!((now.body(), now.revision), (then.body(), then.revision));
            assert_ne!(address(now), address(then), "copied into the block");
        }
    }

    /// A pass moves every object into blocks but the large ones, serves the same content throughout,
    /// keeps what was written while it ran (also new objects between packed ones), and ends with
    /// `packing` cleared and a list of its runs and objects that is the map's objects exactly.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_packs_everything_and_a_later_write_wins() {
        let n = 20_000;
        let large = |i: usize| i % 50 == 49;
        let before = objects(n, |i| if large(i) { LARGE + 1 } else { [200, 400][i % 2] });
        let c = cacher(before.clone());
        c.lock_write().packing = true;
        // Rewrites while the pass runs, each a body of its own with a newer revision, and new objects
        // right after some (`/k/000007+` sorts between 7 and 8).
        let writer = {
            let c = c.clone();
            tokio::spawn(async move {
                let mut written = std::collections::HashSet::new();
                for i in (0..n).step_by(7) {
                    if i % 2100 == 0 {
                        list_is_its_snapshot(&c);
                    }
                    let key: Arc<str> = format!("/k/{i:06}").into();
                    c.lock_write().set(key.clone(), entry(format!("rewritten {i}"), (n + i) as i64));
                    c.lock_write().set(format!("/k/{i:06}+").into(), entry(format!("added {i}"), (2 * n + i) as i64));
                    written.insert(i);
                    tokio::task::yield_now().await;
                }
                written
            })
        };
        pass(c.clone()).await;
        let written = writer.await.unwrap();
        let head = crate::watch::cache::Head::of(&c.def);
        let (listed, runs) = crate::watch::cache::tests::listed(&c, head.clone(), false);
        let st = c.lock_read();
        assert!(!st.packing, "the pass is over");
        assert!(runs > 0 && st.runs.len() > 0);
        let want: Vec<u8> = st.objects.values().flat_map(|e| [b",", head.bytes(), e.body()].concat()).collect();
        assert!(listed == want, "a list is the objects in the map");
        assert_true_to(&st.runs, &st.objects);
        for (key, e) in st.objects.iter() {
            if let Some(added) = key.strip_suffix('+') {
                let i: usize = added["/k/".len()..].parse().unwrap();
                assert_eq!(e.body(), format!("added {i}").as_bytes());
                continue;
            }
            let i: usize = key["/k/".len()..].parse().unwrap();
            if written.contains(&i) {
                assert_eq!((e.body(), e.revision), (format!("rewritten {i}").as_bytes(), (n + i) as i64));
                continue;
            }
            let original = &before[key];
            assert_eq!((e.body(), e.revision), (original.body(), original.revision));
            assert_eq!(address(e) == address(original), large(i), "only a large object stays where it was");
        }
    }

    /// A list of everything, taken now and with every other piece declined, is the objects of its
    /// snapshot in key order.
    fn list_is_its_snapshot(c: &Arc<Cacher>) {
        let head = crate::watch::cache::Head::of(&c.def);
        let snapshot = c.snapshot(&Scope { cluster: None, namespace: None });
        let want: Vec<u8> = snapshot.iter().flat_map(|(_, e)| [b",", head.bytes(), e.body()].concat()).collect();
        let (listed, _) = crate::watch::cache::tests::list_of(snapshot, head, true);
        assert!(listed == want, "a list is the objects of its snapshot");
    }

    /// Every run is its span of the map exactly: the objects from its first key to its last, in a row,
    /// its bytes theirs; and no two runs overlap.
    fn assert_true_to(runs: &Runs, objects: &Objects) {
        let mut previous: Option<&Arc<str>> = None;
        for (first, run) in runs.by_first.iter() {
            assert!(previous.is_none_or(|p| p < first), "runs overlap at {first}");
            let span: Vec<&Entry> = objects
                .range::<_, str>((Bound::Included(&**first), Bound::Included(&*run.last)))
                .map(|(_, e)| e)
                .collect();
            let bytes: Vec<u8> = span.iter().flat_map(|e| [&runs.sep[..], e.body()].concat()).collect();
            assert!(run.bytes == bytes, "the run at {first} is its objects");
            let (head, tail) = (span[0], span[span.len() - 1]);
            let block = Entry::run(head, tail, &runs.sep);
            assert_eq!(run.bytes.as_ptr(), block.as_ptr(), "the run at {first} is in its objects' block");
            assert!(span.windows(2).all(|w| w[1].follows(w[0], &runs.sep)), "the run at {first} lies in a row");
            previous = Some(&run.last);
        }
    }

    /// Runs stay true to the map: a write to a run's first or last key forgets it, and indexing a span
    /// forgets every run reaching into it, also one that ends at its first key.
    #[tokio::test]
    async fn runs_are_their_objects_in_the_map() {
        let c = cacher(objects(3000, |_| 100));
        c.lock_write().packing = true;
        pass(c.clone()).await;
        {
            let mut guard = c.lock_write();
            let st = &mut *guard;
            assert_eq!(st.runs.len(), 3);
            assert_true_to(&st.runs, &st.objects);
            let spans: Vec<(Arc<str>, Arc<str>)> =
                st.runs.by_first.iter().map(|(f, r)| (f.clone(), r.last.clone())).collect();
            // A span starting at the first run's last key, whose object moved (as a swap moves it).
            let (_, last) = &spans[0];
            let moved = st.objects[last].detached();
            st.objects.insert(last.clone(), moved);
            st.runs.index(&st.objects, Some(last), Some(&spans[1].0));
            assert_true_to(&st.runs, &st.objects);
            assert_eq!(
                st.runs.first_from(Bound::Unbounded).map(|(f, _)| f),
                Some(&spans[1].0),
                "the first run is gone"
            );
            // Writes to the last key of one run and the first of another.
            st.set(spans[1].1.clone(), entry(&b"x"[..], 9));
            st.set(spans[2].0.clone(), entry(&b"y"[..], 9));
            assert_eq!(st.runs.len(), 0);
            st.runs.index(&st.objects, None, None);
            assert_true_to(&st.runs, &st.objects);
            assert_eq!(st.runs.len(), 3, "each block but the object moved or written at its end");
            // Deletes and new objects move the next pass's step boundaries off the runs of the last.
            for i in (0..1500).step_by(3) {
                st.delete(&format!("/k/{i:06}"));
                st.set(format!("/k/{:06}+", i + 1).into(), entry(vec![b'n'; 150], 10));
            }
            assert_true_to(&st.runs, &st.objects);
            st.packing = true;
        }
        list_is_its_snapshot(&c);
        pass(c.clone()).await;
        let st = c.lock_read();
        assert_true_to(&st.runs, &st.objects);
        assert_eq!(st.runs.len(), 3, "one run a block again");
        drop(st);
        list_is_its_snapshot(&c);
    }

    /// A reload while a pass runs: the pass goes on over the new objects, and whatever it indexes is
    /// theirs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_reload_during_a_pass_leaves_runs_true_to_the_new_objects() {
        let c = cacher(objects(20_000, |_| 100));
        c.lock_write().packing = true;
        let running = tokio::spawn(pass(c.clone()));
        while c.lock_read().runs.len() < 2 {
            tokio::task::yield_now().await;
        }
        c.reset(objects(20_000, |i| 50 + i % 100), 99);
        list_is_its_snapshot(&c);
        running.await.unwrap();
        let st = c.lock_read();
        assert_true_to(&st.runs, &st.objects);
        drop(st);
        list_is_its_snapshot(&c);
    }

    /// A list across every cluster starts a due pass; a tenant's list does not, nor a cache not due.
    #[tokio::test]
    async fn a_whole_list_starts_a_due_pass() {
        let c = cacher(objects(2 * MIN_OBJECTS, |_| 100));
        let everywhere = Scope { cluster: None, namespace: None };
        let tenant = Scope { cluster: Some("a".into()), namespace: None };
        let _ = c.snapshot(&everywhere);
        assert!(!c.lock_read().packing, "no writes yet");
        c.lock_write().written = MIN_OBJECTS;
        let _ = c.snapshot(&tenant);
        assert!(!c.lock_read().packing, "a tenant's list");
        let _ = c.snapshot(&everywhere);
        assert!(c.lock_read().packing && c.lock_read().written == 0);
        while c.lock_read().packing {
            tokio::task::yield_now().await;
        }
        assert!(c.lock_read().packed);
        // A reload puts every object back in an allocation of its own: the next whole list packs again.
        c.reset(objects(2 * MIN_OBJECTS, |_| 100), 5);
        assert!(!c.lock_read().packed);
        let _ = c.snapshot(&everywhere);
        assert!(c.lock_read().packing, "a load's objects are packed at the first whole list");
    }

    #[test]
    fn small_caches_and_few_writes_are_left_alone() {
        assert!(!due(MIN_OBJECTS - 1, 1_000_000));
        assert!(!due(10_000, 4_999));
        assert!(due(10_000, 5_000));
    }
}
