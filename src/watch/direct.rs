//! A watcher's own store watch, for a resume point older than the watch cache's history (after a kgate
//! restart the cache's history starts at the restart, but the store may still hold the client's place).

use futures::{FutureExt, StreamExt};
use serde_json::{json, Value};

use super::cache::Scope;
use crate::registry::{ListOptions, Registry};
use crate::resources::ResourceDef;
use crate::status::ApiResult;
use crate::storage::{Revision, StoreError, WatchEvent, WatchStream};

/// One store event as this watcher's watch event.
pub struct Change {
    pub kind: &'static str,
    pub object: Value,
    pub revision: Revision,
    /// The key's `sent::key_hash`.
    pub key: u64,
    /// The last of its revision's events.
    pub ends: bool,
}

/// A store watch of one scope, translated to watch events.
pub struct DirectWatch {
    registry: Registry,
    def: std::sync::Arc<ResourceDef>,
    scope: Scope,
    opts: ListOptions,
    stream: WatchStream,
    /// The stream's next item, taken to see whether the last one given out ended its revision
    /// (`Some(None)`: the stream ended).
    held: Option<Option<Result<WatchEvent, StoreError>>>,
    revision: Revision,
    /// Every change up to this revision has been given out: the last event's revision once its
    /// revision's events are all out, else the one before it, or a progress notification's.
    whole: Revision,
    /// Counts open store-fed watchers; decremented on drop.
    gauge: prometheus::IntGauge,
}

impl Drop for DirectWatch {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

impl DirectWatch {
    /// Watch the scope's keys after `after`; fails with `Compacted` when the store no longer has it.
    pub async fn open(
        registry: &Registry,
        def: &std::sync::Arc<ResourceDef>,
        scope: &Scope,
        opts: &ListOptions,
        after: Revision,
        gauge: &prometheus::IntGauge,
    ) -> Result<Self, StoreError> {
        let prefix = registry.collection(def, scope.cluster.as_deref(), scope.namespace.as_deref());
        let stream = registry.store.watch(&prefix, after).await?;
        gauge.inc();
        Ok(DirectWatch {
            gauge: gauge.clone(),
            registry: registry.clone(),
            def: def.clone(),
            scope: scope.clone(),
            opts: opts.clone(),
            stream,
            held: None,
            revision: after,
            whole: after,
        })
    }

    /// Every change before this revision has been seen, and some of this one's.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// Every change up to this revision has been seen.
    pub fn whole(&self) -> Revision {
        self.whole
    }

    /// Whether an event is waiting to be given out.
    pub fn has_ready(&self) -> bool {
        matches!(self.held, Some(Some(_)))
    }

    /// The next store event as a watch event (`None` inside when it concerns nobody here); `None`
    /// when the stream ends.
    pub async fn next(&mut self) -> Option<ApiResult<Option<Change>>> {
        let next = match self.held.take() {
            Some(held) => held,
            None => self.stream.next().await,
        };
        let ev = match next? {
            Ok(ev) => ev,
            Err(e) => return Some(Err(e.into())),
        };
        let rev = ev.revision();
        // A revision's events come together (etcd never splits one across watch responses, and the
        // store's stream hands a response's events out without waiting, as the cache relies on too):
        // the last of them is the one not followed by another of its revision ready now.
        self.held = self.stream.next().now_or_never();
        let ends = match &self.held {
            Some(Some(Ok(later))) => later.revision() != rev,
            // The watch fails with it: claim nothing more.
            Some(Some(Err(_))) => false,
            Some(None) | None => true,
        };
        self.revision = self.revision.max(rev);
        let whole = if ends || matches!(ev, WatchEvent::Progress(_)) { rev } else { rev - 1 };
        self.whole = self.whole.max(whole);
        let key = match &ev {
            WatchEvent::Put { kv, .. } => super::sent::key_hash(&kv.key),
            WatchEvent::Delete { key, .. } => super::sent::key_hash(key),
            WatchEvent::Progress(_) => 0,
        };
        Some(self.translate(ev).map(|o| o.map(|(kind, object)| Change { kind, object, revision: rev, key, ends })))
    }

    fn translate(&self, ev: WatchEvent) -> ApiResult<Option<(&'static str, Value)>> {
        // The selector-transition rule of `super::translate`, over the store's previous value.
        let (registry, def) = (&self.registry, &*self.def);
        let cluster_for = |key: &str| -> Option<String> {
            match &self.scope.cluster {
                Some(c) => Some(c.clone()),
                None => registry.cluster_of(def, key).map(str::to_string),
            }
        };
        let opts = &self.opts;
        let namespace = self.scope.namespace.as_deref();
        let passes = |obj: &Value| {
            crate::registry::matches(def, obj, opts)
                && (self.scope.cluster.is_some()
                    || namespace.is_none()
                    || crate::meta::meta_str(obj, "namespace") == namespace)
        };
        match ev {
            WatchEvent::Progress(_) => Ok(None),
            WatchEvent::Put { kv, prev, .. } => {
                let Some(c) = cluster_for(&kv.key) else { return Ok(None) };
                let new = registry.decode(def, &c, &kv)?;
                let old = match &prev {
                    Some(p) => Some(registry.decode(def, &c, p)?).filter(|o| passes(o)),
                    None => None,
                };
                Ok(match (old, passes(&new)) {
                    (None, true) => Some(("ADDED", new)),
                    (Some(_), true) => Some(("MODIFIED", new)),
                    (Some(mut last), false) => {
                        crate::meta::metadata_mut(&mut last)
                            .insert("resourceVersion".into(), json!(kv.mod_revision.to_string()));
                        Some(("DELETED", last))
                    }
                    (None, false) => None,
                })
            }
            WatchEvent::Delete { revision, prev, key } => {
                let Some(c) = cluster_for(&key) else { return Ok(None) };
                let Some(p) = prev else { return Ok(None) };
                let mut last = registry.decode(def, &c, &p)?;
                if !passes(&last) {
                    return Ok(None);
                }
                crate::meta::metadata_mut(&mut last).insert("resourceVersion".into(), json!(revision.to_string()));
                Ok(Some(("DELETED", last)))
            }
        }
    }
}
