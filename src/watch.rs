//! Watch: turn a store watch under one collection prefix into Kubernetes watch events for one request,
//! with the initial-state, selector-transition, bookmark and timeout rules of kube-apiserver.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use crate::registry::{ListOptions, Registry, RvMatch};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::storage::{Revision, StoreError, WatchEvent};

/// How often a bookmark is sent when the client allows them.
const BOOKMARK_EVERY: Duration = Duration::from_secs(30);
/// Events buffered per watcher before the producer waits for the client.
const WATCHER_BUFFER: usize = 256;
/// kube-apiserver's `--min-request-timeout`, the base of the random default watch timeout.
const MIN_REQUEST_TIMEOUT: u64 = 1800;

/// How each event's object is rendered (plain object or a one-row Table).
pub type Render = Arc<dyn Fn(&Value, bool) -> Value + Send + Sync>;

/// One watch request.
pub struct WatchRequest {
    /// Resource type.
    pub def: Arc<ResourceDef>,
    /// One cluster, or `None` for every cluster.
    pub cluster: Option<String>,
    /// Namespace filter from the path.
    pub namespace: Option<String>,
    /// Selectors and resourceVersion options.
    pub opts: ListOptions,
    /// Renders objects (Table conversion for kubectl get -w).
    pub render: Render,
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut s = serde_json::to_vec(&json!({"type": kind, "object": object})).expect("JSON serialises");
    s.push(b'\n');
    Bytes::from(s)
}

fn error_line(e: &ApiError) -> Bytes {
    line("ERROR", e.to_status())
}

fn bookmark(def: &ResourceDef, rev: Revision, initial_end: bool) -> Value {
    let mut meta = json!({"resourceVersion": rev.to_string(), "creationTimestamp": null});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": def.kind, "apiVersion": def.api_version(), "metadata": meta})
}

/// Start a watch; returns the stream of newline-delimited JSON events for the response body.
pub async fn start(
    registry: Registry,
    req: WatchRequest,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> ApiResult<mpsc::Receiver<Bytes>> {
    let def = req.def.clone();
    crate::registry::check_fields(&def, &req.opts)?;
    let opts = &req.opts;
    let rv = opts.resource_version.as_deref();
    let initial = match opts.send_initial_events {
        Some(v) => v,
        None => rv.is_none() || rv == Some("0"),
    };
    let (tx, rx) = mpsc::channel::<Bytes>(WATCHER_BUFFER);
    let user = crate::auth::Identity { user: String::new(), groups: vec![] };
    let ctx = crate::registry::Ctx {
        cluster: req.cluster.as_deref().unwrap_or(""),
        def: &def,
        namespace: req.namespace.as_deref(),
        user: &user,
        user_agent: None,
    };
    let mut initial_items = Vec::new();
    let start_rev = if initial {
        let mut lo = opts.clone();
        lo.limit = 0;
        lo.continue_token = None;
        lo.rv_match = None;
        lo.resource_version = match (opts.rv_match, rv) {
            (Some(RvMatch::NotOlderThan), Some(r)) if r != "0" => Some(r.to_string()),
            _ => None,
        };
        let list = registry.list(&ctx, req.cluster.as_deref(), &lo).await?;
        initial_items = list.items;
        list.revision
    } else {
        match rv {
            Some(r) if r != "0" => {
                r.parse::<Revision>().map_err(|_| ApiError::bad_request(format!("invalid resource version: {r}")))?
            }
            _ => registry.store.revision().await?,
        }
    };
    let prefix = registry.collection(&def, req.cluster.as_deref(), req.namespace.as_deref());
    let stream = match registry.store.watch(&prefix, start_rev).await {
        Ok(s) => Some(s),
        Err(StoreError::Compacted { requested, compacted }) => {
            // As kube-apiserver: a 200 stream with one ERROR event, so every client relists.
            let e = ApiError::expired(format!("too old resource version: {requested} ({})", compacted + 1));
            let _ = tx.send(error_line(&e)).await;
            None
        }
        Err(e) => return Err(e.into()),
    };
    let Some(mut stream) = stream else {
        return Ok(rx);
    };
    let timeout = match opts.timeout_seconds {
        Some(t) if t > 0 => Duration::from_secs(t as u64),
        _ => Duration::from_secs(MIN_REQUEST_TIMEOUT + rand::random::<u64>() % MIN_REQUEST_TIMEOUT),
    };
    let bookmarks = opts.bookmarks;
    let send_initial_end = opts.send_initial_events == Some(true);
    let render = req.render.clone();
    let opts = req.opts.clone();
    let fixed_cluster = req.cluster.clone();
    let namespace = req.namespace.clone();
    tokio::spawn(async move {
        let mut first = true;
        let emit = |kind: &str, obj: &Value, first: &mut bool| {
            let b = line(kind, render(obj, *first));
            *first = false;
            b
        };
        for obj in &initial_items {
            let b = emit("ADDED", obj, &mut first);
            if tx.send(b).await.is_err() {
                return;
            }
        }
        let mut last_rev = start_rev;
        if send_initial_end && tx.send(line("BOOKMARK", bookmark(&def, last_rev, true))).await.is_err() {
            return;
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + BOOKMARK_EVERY, BOOKMARK_EVERY);
        loop {
            let ev = tokio::select! {
                _ = &mut deadline => {
                    if bookmarks {
                        let _ = tx.send(line("BOOKMARK", bookmark(&def, last_rev, false))).await;
                    }
                    return;
                }
                _ = shutdown.changed() => return,
                _ = tx.closed() => return,
                _ = ticker.tick() => {
                    if bookmarks && tx.send(line("BOOKMARK", bookmark(&def, last_rev, false))).await.is_err() {
                        return;
                    }
                    continue;
                }
                ev = stream.next() => ev,
            };
            let ev = match ev {
                None => return,
                Some(Err(e)) => {
                    let _ = tx.send(error_line(&ApiError::from(e))).await;
                    return;
                }
                Some(Ok(ev)) => ev,
            };
            last_rev = last_rev.max(ev.revision());
            let out = match translate(&registry, &def, fixed_cluster.as_deref(), namespace.as_deref(), &opts, ev) {
                Ok(Some((kind, obj))) => emit(kind, &obj, &mut first),
                Ok(None) => continue,
                Err(e) => error_line(&e),
            };
            if tx.send(out).await.is_err() {
                return;
            }
        }
    });
    Ok(rx)
}

/// Map a store event to a watch event for this request, applying selector transitions.
fn translate(
    registry: &Registry,
    def: &ResourceDef,
    cluster: Option<&str>,
    namespace: Option<&str>,
    opts: &ListOptions,
    ev: WatchEvent,
) -> ApiResult<Option<(&'static str, Value)>> {
    let cluster_for = |key: &str| -> Option<String> {
        match cluster {
            Some(c) => Some(c.to_string()),
            None => registry.cluster_of(def, key).map(str::to_string),
        }
    };
    let passes = |obj: &Value| {
        crate::registry::matches(def, obj, opts)
            && (cluster.is_some() || namespace.is_none() || crate::meta::meta_str(obj, "namespace") == namespace)
    };
    match ev {
        WatchEvent::Progress(_) => Ok(None),
        WatchEvent::Put { kv, prev } => {
            let Some(c) = cluster_for(&kv.key) else {
                return Ok(None);
            };
            let new = registry.decode(def, &c, &kv)?;
            let old = match &prev {
                Some(p) => Some(registry.decode(def, &c, p)?).filter(|o| passes(o)),
                None => None,
            };
            let now = passes(&new);
            Ok(match (old, now) {
                (None, true) => Some(("ADDED", new)),
                (Some(_), true) => Some(("MODIFIED", new)),
                // Leaving the selection: DELETED with the last state that matched, at the new
                // resourceVersion, as kube-apiserver's cacher sends it.
                (Some(mut last), false) => {
                    crate::meta::metadata_mut(&mut last)
                        .insert("resourceVersion".into(), json!(kv.mod_revision.to_string()));
                    Some(("DELETED", last))
                }
                (None, false) => None,
            })
        }
        WatchEvent::Delete { revision, prev, key } => {
            let Some(c) = cluster_for(&key) else {
                return Ok(None);
            };
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
