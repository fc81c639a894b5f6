//! Which reads the watch cache serves, and serving them: lists and gets with `resourceVersion=0` (any
//! recent state), lists at least as new as a given revision, and consistent lists once the cache has
//! caught up with the store's revision (kube-apiserver's consistent reads from cache). Everything else
//! (exact revisions, continued pages, a cache that is behind) is read from the store.

use std::ops::ControlFlow;
use std::sync::Arc;

use bytes::Bytes;

use super::cache::{Entry, Scope, WatchCache};
use super::{FRESHNESS_PATIENCE, LOAD_PATIENCE};
use crate::registry::{ListOptions, Registry, RvMatch};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::Revision;

/// A page of a list served from the cache.
pub struct CachedList {
    /// Matching objects, as JSON.
    pub items: Vec<CachedJson>,
    /// The revision they are current at.
    pub revision: Revision,
    /// Token for the next page (continued from the store at `revision`).
    pub continue_token: Option<String>,
}

/// A cached object's JSON, shared with the cache: taking it costs a reference count on the entry, not a
/// copy, and it stays valid however the cache changes meanwhile.
#[derive(Clone)]
pub struct CachedJson(Arc<Entry>);

impl std::ops::Deref for CachedJson {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0.json
    }
}

impl AsRef<[u8]> for CachedJson {
    fn as_ref(&self) -> &[u8] {
        &self.0.json
    }
}

/// Serve a list from the cache when its options allow; `None` means read the store.
pub async fn list(
    cache: &WatchCache,
    registry: &Registry,
    def: &Arc<ResourceDef>,
    cluster: Option<&str>,
    namespace: Option<&str>,
    opts: &ListOptions,
) -> ApiResult<Option<CachedList>> {
    if opts.continue_token.is_some() || opts.rv_match == Some(RvMatch::Exact) {
        return Ok(None);
    }
    crate::registry::check_fields(def, opts)?;
    let rv = opts.resource_version.as_deref();
    let cacher = match rv {
        // Any recent state: start the type's cache if needed (informers list this way before watching).
        Some("0") => cache.cacher(def, LOAD_PATIENCE).await?,
        Some(r) => {
            // A revision with a limit and no match rule means Exact (WIRE.md section 5).
            if opts.limit > 0 && opts.rv_match.is_none() {
                return Ok(None);
            }
            let need: Revision =
                r.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {r}")))?;
            let Some(c) = cache.existing(def) else { return Ok(store(cache, def)) };
            if c.wait_for(Some(need), FRESHNESS_PATIENCE).await.is_none() {
                return Ok(store(cache, def));
            }
            c
        }
        None => {
            // Consistent: only a cache that has applied the store's current revision.
            let Some(c) = cache.existing(def) else { return Ok(store(cache, def)) };
            let need = registry.store.revision().await?;
            let patience =
                if registry.store.reports_progress() { FRESHNESS_PATIENCE } else { std::time::Duration::ZERO };
            if c.revision() < need && c.wait_for(Some(need), patience).await.is_none() {
                return Ok(store(cache, def));
            }
            c
        }
    };
    let scope = Scope {
        cluster: cluster.map(str::to_string),
        namespace: if def.namespaced { namespace.map(str::to_string) } else { None },
    };
    let filtered = !opts.selects_all();
    let limit = if opts.limit > 0 { opts.limit } else { usize::MAX };
    let mut items = Vec::new();
    // The key of a page's last item, when more follow (for the continue token).
    let mut last_key: Option<Box<str>> = None;
    let revision = if filtered {
        // Selectors parse each object, which must not happen under the cache's lock: take the entries
        // (and keys, only if a page may end early) first.
        let mut entries = Vec::new();
        let mut keys = Vec::new();
        let revision = cacher.scan(&scope, |k, e| {
            entries.push(e.clone());
            if opts.limit > 0 {
                keys.push(Box::<str>::from(k));
            }
            ControlFlow::Continue(())
        });
        let mut iter = entries.iter().enumerate().peekable();
        while let Some((i, e)) = iter.next() {
            if !passes(def, opts, e)? {
                continue;
            }
            items.push(CachedJson(e.clone()));
            if items.len() == limit {
                if iter.peek().is_some() {
                    last_key = keys.get(i).cloned();
                }
                break;
            }
        }
        revision
    } else {
        // Only the entries are taken (a reference count each: the Arc's count shares a cache line with the
        // JSON's pointer, which the body reads anyway), and one key when a page ends early.
        let mut pending: Option<Box<str>> = None;
        cacher.scan(&scope, |k, e| {
            if items.len() == limit {
                last_key = pending.take();
                return ControlFlow::Break(());
            }
            items.push(CachedJson(e.clone()));
            if items.len() == limit {
                pending = Some(k.into());
            }
            ControlFlow::Continue(())
        })
    };
    let continue_token = last_key.map(|k| {
        let prefix = registry.collection(def, cluster, namespace);
        crate::registry::encode_continue(revision, &format!("{}\u{0}", &k[prefix.len()..]))
    });
    cache.count_read(def, true);
    Ok(Some(CachedList { items, revision, continue_token }))
}

/// The store serves this read (counted, so operators see how often the cache was not fresh enough).
fn store(cache: &WatchCache, def: &ResourceDef) -> Option<CachedList> {
    cache.count_read(def, false);
    None
}

fn passes(def: &ResourceDef, opts: &ListOptions, e: &Entry) -> ApiResult<bool> {
    Ok(crate::registry::matches(def, &e.value()?, opts))
}

/// Serve a GET with `resourceVersion=0` from the cache; `None` when the object does not exist.
pub async fn get_any(cache: &WatchCache, def: &Arc<ResourceDef>, key: &str) -> ApiResult<Option<Bytes>> {
    let cacher = cache.cacher(def, LOAD_PATIENCE).await?;
    cache.count_read(def, true);
    Ok(cacher.get(key).0.map(|e| e.json.clone()))
}
