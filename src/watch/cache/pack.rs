//! Packing: the cached objects' JSON copied, in key order, into shared blocks, so that a list reads a
//! few runs of memory instead of one allocation per object wherever the allocator happened to put it.
//!
//! Objects enter the cache one write at a time, each in an allocation of its own among whatever else
//! the server allocated meanwhile (watch events, requests). A list across clusters then reads 10,000
//! allocations spread over the heap: after the fan-out bench's writes, copying them into the answer
//! took a third of kgate's CPU per list, against a fifth when the same objects had been written in a
//! row. Once half as many writes as there are objects have landed since the last pass, a task copies
//! every body in key order into blocks of [`BLOCK`] bytes, one block per step, and swaps in each copy
//! whose object has not been written since it was copied (a later write always wins). It yields
//! between steps, so the ingest task and readers wait for at most one step's swap.
//!
//! Memory: a block is freed once none of its objects is referenced (by the map, the history or a
//! watcher's queue). Between passes at most half the objects are rewritten, so a pass leaves blocks at
//! least half live, and the next moves the live objects out of blocks that have thinned. A body in a
//! block has no allocation of its own: no allocator header and no spare capacity from growing while it
//! was serialised, which is about what the dead half costs.

use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::{Cacher, Entry, Objects, State};

/// Bytes per block: one step copies at most this much and swaps its objects under one write lock.
const BLOCK: usize = 256 * 1024;
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

/// Copy the bodies of the objects from `start` on into one block, in key order; returns the copies and
/// the key the next step starts at (`None` after the last object).
fn step(objects: &Objects, start: Option<&Arc<str>>) -> (Vec<Moved>, Option<Arc<str>>) {
    let lower = start.map_or(Bound::Unbounded, |k| Bound::Included(&**k));
    let mut picked = Vec::new();
    let mut size = 0;
    let mut next = None;
    for (key, entry) in objects.range::<_, str>((lower, Bound::Unbounded)) {
        let n = entry.body.len();
        if n > LARGE {
            continue;
        }
        if size + n > BLOCK {
            next = Some(key.clone());
            break;
        }
        size += n;
        picked.push((key, entry));
    }
    let mut block = Vec::with_capacity(size);
    for (_, entry) in &picked {
        block.extend_from_slice(&entry.body);
    }
    let block = Bytes::from(block);
    let mut at = 0;
    let moved = picked
        .into_iter()
        .map(|(key, entry)| {
            let n = entry.body.len();
            at += n;
            Moved {
                key: key.clone(),
                entry: Entry { body: block.slice(at - n..at), revision: entry.revision },
                from: entry.body.as_ptr() as usize,
            }
        })
        .collect();
    (moved, next)
}

/// Swap in the copies whose objects are unchanged.
fn swap(st: &mut State, moved: Vec<Moved>) {
    for m in moved {
        if let Some(current) = st.objects.get_mut::<str>(&m.key) {
            if current.body.as_ptr() as usize == m.from && current.revision == m.entry.revision {
                *current = m.entry;
            }
        }
    }
}

/// One pass over the cache, a block at a time.
pub(super) async fn run(cacher: Arc<Cacher>) {
    let mut start = None;
    loop {
        let objects = cacher.lock_read().objects.clone();
        let (moved, next) = step(&objects, start.as_ref());
        {
            let mut st = cacher.lock_write();
            swap(&mut st, moved);
            st.packing &= next.is_some();
        }
        // Only now: until the swap, every body copied must stay allocated (see `Moved::from`).
        drop(objects);
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

    /// A map of `n` objects whose bodies are `size` bytes (sizes cycle through `sizes`).
    fn objects(n: usize, sizes: &[usize]) -> Objects {
        (0..n)
            .map(|i| {
                let size = sizes[i % sizes.len()];
                let body = Bytes::from(vec![b'a' + (i % 26) as u8; size]);
                (Arc::<str>::from(format!("/k/{i:06}")), Entry { body, revision: i as i64 + 1 })
            })
            .collect()
    }

    fn address(e: &Entry) -> usize {
        e.body.as_ptr() as usize
    }

    /// A step copies bodies in key order into one run of at most a block, each unchanged in content
    /// and revision, passes over large ones, and names where the next step starts.
    #[test]
    fn a_step_copies_bodies_in_key_order_into_one_block() {
        let map = objects(4000, &[300, 500, LARGE + 1, 120]);
        let (moved, next) = step(&map, None);
        let next = next.expect("4000 objects are more than a block");
        let total: usize = moved.iter().map(|m| m.entry.body.len()).sum();
        assert!(total <= BLOCK && total + 500 > BLOCK, "a step fills its block: {total} bytes");
        for pair in moved.windows(2) {
            assert!(pair[0].key < pair[1].key, "key order");
            assert_eq!(address(&pair[0].entry) + pair[0].entry.body.len(), address(&pair[1].entry), "one run");
        }
        for m in &moved {
            let original = map.get(&m.key).unwrap();
            assert_eq!((&m.entry.body, m.entry.revision), (&original.body, original.revision));
            assert_eq!(m.from, address(original));
            assert!(m.entry.body.len() <= LARGE);
        }
        assert!(moved.iter().all(|m| *m.key < *next), "the next step starts after this one");
        let before_next: Vec<_> = map.range::<_, str>((Bound::Unbounded, Bound::Excluded(&*next))).collect();
        let large = before_next.iter().filter(|(_, e)| e.body.len() > LARGE).count();
        assert!(large > 0);
        assert_eq!(before_next.len() - moved.len(), large, "only the large objects are left where they are");
    }

    /// A pass moves every object into blocks, leaves large ones, serves the same content throughout,
    /// and never undoes a write made while it runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_pass_packs_everything_and_a_later_write_wins() {
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let metrics = crate::metrics::Metrics::new(prometheus::Registry::new()).unwrap().cache;
        let c = Cacher::new(def, "/k/".into(), metrics);
        let n = 20_000;
        let before = objects(n, &[200, 400, LARGE + 1]);
        c.lock_write().objects = before.clone();
        c.lock_write().packing = true;
        // Rewrites while the pass runs, each a body of its own with a newer revision.
        let writer = {
            let c = c.clone();
            tokio::spawn(async move {
                let mut written = std::collections::HashSet::new();
                for i in (0..n).step_by(7) {
                    let key: Arc<str> = format!("/k/{i:06}").into();
                    let entry = Entry { body: Bytes::from(format!("rewritten {i}")), revision: (n + i) as i64 };
                    c.lock_write().objects.insert(key.clone(), entry);
                    written.insert(key);
                    tokio::task::yield_now().await;
                }
                written
            })
        };
        run(c.clone()).await;
        let written = writer.await.unwrap();
        let st = c.lock_read();
        assert!(!st.packing, "the pass is over");
        for key in &written {
            let e = st.objects.get(key).unwrap();
            let i: usize = key[3..].parse().unwrap();
            assert_eq!((&e.body[..], e.revision), (format!("rewritten {i}").as_bytes(), (n + i) as i64));
        }
        let mut in_place = 0;
        for (key, e) in st.objects.iter() {
            if written.contains(key) {
                continue;
            }
            let original = before.get(key).unwrap();
            assert_eq!((&e.body, e.revision), (&original.body, original.revision));
            if address(e) == address(original) {
                in_place += 1;
                assert!(e.body.len() > LARGE, "only a large object stays where it was");
            }
        }
        assert_eq!(in_place, (0..n).filter(|i| i % 3 == 2 && i % 7 != 0).count());
    }

    #[test]
    fn small_caches_and_few_writes_are_left_alone() {
        assert!(!due(MIN_OBJECTS - 1, 1_000_000));
        assert!(!due(10_000, 4_999));
        assert!(due(10_000, 5_000));
    }
}
