//! Shards: the etcd clusters logical clusters are spread over (`kgate serve --shard NAME=URL,...`),
//! where each cluster is placed (a LogicalCluster's `spec.shard`), and the one `resourceVersion` a
//! wildcard list or watch spanning several shards answers with.
//!
//! Root and every LogicalCluster object stay on the default shard (`--etcd-servers`, or the embedded
//! store). A cluster's objects live on its shard alone, so each shard keeps its own revisions; a
//! request of one cluster sees one shard's, and a wildcard request sees a composite of every shard's
//! (`default:120,b:7`), which kube allows since a resourceVersion is opaque to clients.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::registry::Registry;
use crate::status::{ApiError, ApiResult};
use crate::storage::Revision;

/// The name of the shard given by `--etcd-servers` (or the embedded store), which also holds root.
pub const DEFAULT: &str = "default";

/// The shard holding a LogicalCluster's objects, when named: `status.shard` while a move the
/// platform asked for (by changing `spec.shard`) has not finished, else `spec.shard`.
pub fn of(lc: &Value) -> Option<&str> {
    lc["status"]["shard"].as_str().or_else(|| target(lc))
}

/// `spec.shard` of a LogicalCluster: where the platform wants its objects.
pub fn target(lc: &Value) -> Option<&str> {
    lc["spec"]["shard"].as_str()
}

/// The shard a LogicalCluster is being moved to, if it is being moved: its objects are on [`of`]'s
/// and the platform asked for another.
pub fn moving_to(lc: &Value) -> Option<&str> {
    let (at, to) = (of(lc).unwrap_or(DEFAULT), target(lc).unwrap_or(DEFAULT));
    (at != to).then_some(to)
}

/// The logical clusters being moved between shards, as the directory's watch sees their
/// LogicalClusters: their requests are answered 503 and their watches end, so that nothing reads the
/// shard they leave while it is emptied, nor writes it, other than the move.
///
/// A `DashSet` with a count beside it: every watch event of a cluster asks whether it is moving,
/// and the count answers "no cluster is" without touching the set's locks.
pub struct Moves {
    names: dashmap::DashSet<String>,
    count: AtomicI64,
    /// Bumped when a cluster starts moving, waking every watch of one cluster to ask whether it is
    /// its own (a watch with nothing to send would otherwise stay on the shard left behind).
    started: tokio::sync::watch::Sender<u64>,
}

impl Default for Moves {
    fn default() -> Self {
        Moves { names: Default::default(), count: AtomicI64::new(0), started: tokio::sync::watch::channel(0).0 }
    }
}

impl Moves {
    /// Told each time a cluster starts moving.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.started.subscribe()
    }

    /// Whether `cluster` is being moved.
    pub fn has(&self, cluster: &str) -> bool {
        self.count.load(Ordering::Relaxed) > 0 && self.names.contains(cluster)
    }

    /// Record whether `cluster` is being moved.
    pub fn set(&self, cluster: &str, moving: bool) {
        if moving {
            if self.names.insert(cluster.to_string()) {
                self.count.fetch_add(1, Ordering::Relaxed);
                self.started.send_modify(|n| *n += 1);
            }
        } else if self.names.remove(cluster).is_some() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Where a shard's revisions start (`storage::based`): 0 for the default shard, whose revisions are
/// its etcd's, as before kgate had shards; for another, a multiple of `based::SPAN` fixed by its name,
/// so that every replica, whatever order it is given its shards in, renders the same revisions, and
/// a cluster moved to another shard never finds its clients' resourceVersions meaning something there.
pub fn revision_base(name: &str) -> Revision {
    use crate::storage::based::SPAN;
    use sha2::{Digest, Sha256};
    if name == DEFAULT {
        return 0;
    }
    let digest = Sha256::digest(name.as_bytes());
    let word = u64::from_be_bytes(digest[..8].try_into().expect("a digest is 32 bytes"));
    // Ranges 1..2^22: the highest revision stays under 2^62, well inside an int64.
    const RANGES: u64 = (1 << 22) - 1;
    (1 + (word % RANGES) as Revision) * SPAN
}

/// Every shard this server serves, with the clusters placed on each as its directory knows them.
///
/// The counts are atomics: the directory's watch task moves them, every LogicalCluster create reads
/// them, and a placement that reads a count a moment old only makes the spread a little less even.
pub struct Shards {
    /// Index 0 is the default shard.
    names: Vec<Arc<str>>,
    /// The registry of each shard after the default one (index `i` at `i - 1`).
    others: Vec<Registry>,
    /// Clusters on each shard that the directory has seen.
    counts: Vec<AtomicI64>,
    /// Clusters this replica placed on each that the directory has not seen yet: a burst of creates
    /// spreads before the watch reports the first of them.
    pending: Vec<AtomicI64>,
}

/// Where a LogicalCluster's `spec.shard` puts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placed {
    /// On the shard with this index.
    At(usize),
    /// On a shard this server has not been given (another replica's configuration, or a removed one).
    Unknown,
}

impl Shards {
    /// The default shard alone.
    pub fn single() -> Arc<Self> {
        Self::new(Vec::new())
    }

    /// The default shard and these others, by name.
    pub fn new(others: Vec<(String, Registry)>) -> Arc<Self> {
        let mut names: Vec<Arc<str>> = vec![Arc::from(DEFAULT)];
        names.extend(others.iter().map(|(n, _)| Arc::from(n.as_str())));
        let n = names.len();
        Arc::new(Shards {
            names,
            others: others.into_iter().map(|(_, r)| r).collect(),
            counts: (0..n).map(|_| AtomicI64::new(0)).collect(),
            pending: (0..n).map(|_| AtomicI64::new(0)).collect(),
        })
    }

    /// Shard names, the default first.
    pub fn names(&self) -> &[Arc<str>] {
        &self.names
    }

    /// Whether more than the default shard is served.
    pub fn is_sharded(&self) -> bool {
        self.names.len() > 1
    }

    /// The registry of shard `index`; the default shard's is `default`, which the caller holds.
    pub fn registry(&self, index: usize, default: &Registry) -> Registry {
        match index {
            0 => default.clone(),
            i => self.others[i - 1].clone(),
        }
    }

    /// Where a LogicalCluster is: `spec.shard`, or the default shard when it has none (it was created
    /// before kgate had shards).
    pub fn place_of(&self, lc: &Value) -> Placed {
        match of(lc) {
            None => Placed::At(0),
            Some(name) => self.index(name).map_or(Placed::Unknown, Placed::At),
        }
    }

    /// The index of the shard named `name`, if this server serves it.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| &**n == name)
    }

    /// `index`, or the message of `spec.shard`'s cause when the shard is not served here.
    pub fn served(&self, name: &str) -> Result<usize, String> {
        self.index(name).ok_or_else(|| {
            let known: Vec<String> = self.names.iter().map(|n| format!("\"{n}\"")).collect();
            format!("Unsupported value: \"{name}\": supported values: {}", known.join(", "))
        })
    }

    /// The shard for a new cluster: the one asked for, which must be served here, else the one with
    /// the fewest clusters (the first of those, so that an unsharded server always picks the default).
    /// A name this server does not serve is refused with the message of `spec.shard`'s cause.
    pub fn choose(&self, asked: Option<&str>) -> Result<usize, String> {
        let at = match asked {
            Some(name) => self.served(name)?,
            None => {
                let load = |i: usize| self.counts[i].load(Ordering::Relaxed) + self.pending[i].load(Ordering::Relaxed);
                (0..self.names.len()).min_by_key(|&i| (load(i), i)).unwrap_or(0)
            }
        };
        // Pending until seen (or given back), however it was placed: `seen` takes one back either way.
        self.pending[at].fetch_add(1, Ordering::Relaxed);
        Ok(at)
    }

    /// A placement whose create failed: it will not be seen.
    pub fn unplace(&self, index: usize) {
        let _ = self.pending[index].fetch_update(Ordering::Relaxed, Ordering::Relaxed, |p| (p > 0).then(|| p - 1));
    }

    /// The directory saw a cluster move from `old` to `new` (`None`: not there).
    pub fn seen(&self, old: Option<usize>, new: Option<usize>) {
        if old == new {
            return;
        }
        if let Some(o) = old {
            self.counts[o].fetch_sub(1, Ordering::Relaxed);
        }
        if let Some(n) = new {
            self.counts[n].fetch_add(1, Ordering::Relaxed);
            // One of this replica's placements, most likely; another's never went up here.
            self.unplace(n);
        }
    }

    /// Clusters on each shard, as the directory knows them.
    pub fn counts(&self) -> Vec<i64> {
        self.counts.iter().map(|c| c.load(Ordering::Relaxed)).collect()
    }

    /// A composite resourceVersion: each shard's revision, by name.
    pub fn encode(&self, revisions: &[Revision]) -> String {
        let parts: Vec<String> = self.names.iter().zip(revisions).map(|(n, r)| format!("{n}:{r}")).collect();
        parts.join(",")
    }

    /// Read a composite resourceVersion: a revision per shard (0 for a shard it does not name, one
    /// added since: everything it holds is new to the client). `"0"` is every shard's "any".
    pub fn decode(&self, rv: &str) -> ApiResult<Vec<Revision>> {
        let mut revs = vec![0; self.names.len()];
        if rv == "0" {
            return Ok(revs);
        }
        let bad = || ApiError::bad_request(format!("invalid resource version: {rv}"));
        if rv.parse::<Revision>().is_ok() {
            // A plain revision is one shard's: it cannot say where a list across shards stood.
            return Err(ApiError::expired(format!(
                "too old resource version: {rv}: a list across shards resumes from the resourceVersion of a list across shards"
            )));
        }
        for part in rv.split(',') {
            let (name, r) = part.split_once(':').ok_or_else(bad)?;
            let r: Revision = r.parse().ok().filter(|r| *r >= 0).ok_or_else(bad)?;
            // A shard since removed: its clusters are not served, so its place in the list is moot.
            if let Some(i) = self.names.iter().position(|n| &**n == name) {
                revs[i] = r;
            }
        }
        Ok(revs)
    }
}

/// The revision of `shard` in a composite resourceVersion (`default:10,b:7`), or the resourceVersion
/// itself when it is not one. An object a wildcard watch across shards delivered carries the
/// composite after its event, whose part for the object's own shard is the object's revision there:
/// so a client writes it back through its cluster's path as it got it.
pub fn own<'a>(rv: &'a str, shard: &str) -> &'a str {
    if !rv.contains(':') {
        return rv;
    }
    rv.split(',').find_map(|p| p.strip_prefix(shard)?.strip_prefix(':')).unwrap_or(rv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn three() -> Arc<Shards> {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn crate::storage::Store> =
            Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let r = Registry::new(store, "/registry");
        Shards::new(vec![("b".into(), r.clone()), ("c".into(), r)])
    }

    #[test]
    fn a_cluster_goes_where_it_asks_or_to_the_emptiest_shard() {
        let s = three();
        assert_eq!(s.choose(Some("c")).unwrap(), 2);
        s.unplace(2);
        let e = s.choose(Some("z")).unwrap_err();
        assert_eq!(e, "Unsupported value: \"z\": supported values: \"default\", \"b\", \"c\"");
        s.seen(None, Some(2));
        s.seen(None, Some(0));
        // b is emptiest; then, with b's pending placement counted, all three tie and the first wins.
        assert_eq!(s.choose(None).unwrap(), 1);
        assert_eq!(s.choose(None).unwrap(), 0);
        s.seen(None, Some(1));
        s.seen(Some(1), None);
        assert_eq!(s.counts(), [1, 0, 1]);
        assert_eq!(s.place_of(&json!({"spec": {"shard": "b"}})), Placed::At(1));
        assert_eq!(s.place_of(&json!({"spec": {}})), Placed::At(0));
        assert_eq!(s.place_of(&json!({"spec": {"shard": "gone"}})), Placed::Unknown);
    }

    #[test]
    fn a_composite_resource_version_names_every_shard() {
        let s = three();
        assert_eq!(s.encode(&[10, 2, 0]), "default:10,b:2,c:0");
        assert_eq!(s.decode("default:10,b:2,c:0").unwrap(), [10, 2, 0]);
        assert_eq!(s.decode("b:5").unwrap(), [0, 5, 0], "a shard not named starts from nothing");
        assert_eq!(s.decode("0").unwrap(), [0, 0, 0]);
        assert_eq!(s.decode("12").unwrap_err().code, 410, "one shard's revision says nothing of the others");
        for bad in ["b", "b:x", "b:-1", "", "default:1;b:2"] {
            assert_eq!(s.decode(bad).unwrap_err().code, 400, "{bad:?}");
        }
        assert_eq!(s.decode("default:1,gone:9").unwrap(), [1, 0, 0]);
        assert_eq!((own("default:10,b:7", "b"), own("default:10,bb:7", "b")), ("7", "default:10,bb:7"));
        assert_eq!((own("12", "b"), own("default:10,b:7", "default")), ("12", "10"));
    }
}
