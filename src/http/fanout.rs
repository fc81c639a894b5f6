//! Wildcard list and watch across shards (`/clusters/*/...` when kgate serves more than one shard):
//! every shard's part, under one composite resourceVersion (see `shard`) that a later list or watch
//! resumes from on every shard at once.
//!
//! A shard that does not answer within `PATIENCE` is left out with a `Warning`, never waited on: its
//! clusters answer 503 on their own paths, and the others are served. A watch keeps trying the shard
//! and sends its objects once it is back (from where the composite resourceVersion left it, or, when
//! it never had one, all of them as ADDED, since the client never saw them).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures::{Stream, StreamExt};
use serde_json::{json, Value};

use super::handler::{AppState, Serving};
use super::respond::{self, Body};
use crate::registry::{ClusterFilter, ListOptions, RvMatch};
use crate::resources::ResourceDef;
use crate::shard::Shards;
use crate::status::{ApiError, ApiResult};
use crate::storage::Revision;
use crate::watch::read::Items;
use crate::watch::{Render, WatchBody};

/// How long a shard may take to answer before it is left out.
pub const PATIENCE: Duration = Duration::from_secs(5);

/// How often a watch tries a shard that was down again.
const RETRY: Duration = Duration::from_secs(2);

/// The resourceVersion a wildcard request over several shards names: a composite (`None` when it
/// names none), with the query's resourceVersion replaced by one revision so that the usual checks
/// of the options (`resourceVersionMatch` needs a resourceVersion, and so on) hold as for one store.
pub fn across(q: &crate::request::Query, shards: &Shards) -> ApiResult<(crate::request::Query, Option<Vec<Revision>>)> {
    let Some(rv) = q.non_empty("resourceVersion") else { return Ok((q.clone(), None)) };
    let revs = shards.decode(rv)?;
    let mut q = q.clone();
    let one = if rv == "0" { 0 } else { revs.iter().copied().max().unwrap_or(0).max(1) };
    q.set("resourceVersion", one.to_string());
    Ok((q, Some(revs)))
}

/// A shard's failure that means it is down (unreachable, timed out), not that the request is wrong.
fn down(e: &ApiError) -> bool {
    e.code == 503
}

fn left_out(name: &str, why: &str) -> String {
    format!("shard {name:?} is unavailable ({why}): the objects of its logical clusters are left out")
}

/// Where a list across shards goes on: every shard's revision as of its first page, the shard it
/// stopped in, and that shard's own continue token.
#[derive(Debug, PartialEq)]
struct Cursor {
    revs: Vec<Revision>,
    shard: usize,
    inner: Option<String>,
}

const CURSOR_VERSION: &str = "kgate.dev/shards";

impl Cursor {
    fn encode(&self, shards: &Shards) -> String {
        let doc = json!({"v": CURSOR_VERSION, "rv": shards.encode(&self.revs), "shard": &*shards.names()[self.shard], "continue": self.inner});
        base64::engine::general_purpose::URL_SAFE.encode(doc.to_string())
    }

    fn decode(token: &str, shards: &Shards) -> ApiResult<Cursor> {
        let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
        let raw = base64::engine::general_purpose::URL_SAFE.decode(token).map_err(|_| bad("not base64"))?;
        let doc: Value = serde_json::from_slice(&raw).map_err(|_| bad("not JSON"))?;
        if doc["v"] != CURSOR_VERSION {
            return Err(bad("not a continue key of a list across shards"));
        }
        let revs = shards.decode(doc["rv"].as_str().ok_or_else(|| bad("no resourceVersion"))?)?;
        let name = doc["shard"].as_str().unwrap_or_default();
        let shard = shards.names().iter().position(|n| &**n == name).ok_or_else(|| bad("a shard not served here"))?;
        let inner = doc["continue"].as_str().map(str::to_string);
        Ok(Cursor { revs, shard, inner })
    }
}

/// Whether `token` reads as the continue token of a list across `shards`: the fuzzer's way in.
pub fn reads_as_cursor(token: &str, shards: &Shards) -> bool {
    Cursor::decode(token, shards).is_ok()
}

/// One shard's page.
enum Part {
    /// From the watch cache, as stored (boxed: a page of a cache is a few hundred bytes of cursor).
    Cached(Box<Items>),
    /// From the store, decorated as served.
    Read(Vec<Value>),
}

/// One shard's page of a list: from its cache when the options allow, else from its store.
async fn list_one(
    sh: &Serving,
    def: &Arc<ResourceDef>,
    namespace: Option<&str>,
    opts: &ListOptions,
    account: &Arc<crate::budget::Account>,
    held: &mut Vec<crate::budget::Charge>,
) -> ApiResult<(Part, usize, Revision, Option<String>)> {
    crate::registry::check_fields(def, opts)?;
    let stored = crate::registry::stored_def(def);
    let cached = crate::watch::read::list(&sh.cache, &sh.registry, &stored, None, namespace, opts, Some(account));
    if let Some(l) = cached.await? {
        // Counted only for a page's limit: a list of every object needs no count.
        let count = match (opts.limit, l.items.count()) {
            (0, _) => 0,
            (_, Some(n)) => n,
            (_, None) => l.items.values()?.len(),
        };
        return Ok((Part::Cached(Box::new(l.items)), count, l.revision, l.continue_token));
    }
    // Held whole until the answer is rendered: charged as it is read, refused past the budget.
    let mut charge = |bytes: usize| -> ApiResult<()> { Ok(account.charge_read(held, bytes)?) };
    let l = sh.registry.list_charged(def, None, namespace, opts, &mut charge).await?;
    let count = l.items.len();
    Ok((Part::Read(l.items), count, l.revision, l.continue_token))
}

/// A list across every shard: each shard's objects in turn (a page may end in one shard and the next
/// go on in it), under the composite of the revisions each was read at.
#[allow(clippy::too_many_arguments)]
pub async fn list(
    state: &AppState,
    def: &Arc<ResourceDef>,
    namespace: Option<&str>,
    opts: ListOptions,
    asked: Option<Vec<Revision>>,
    filters: Vec<Option<ClusterFilter>>,
    (shape, include): (respond::Shape, crate::table::IncludeObject),
    account: &Arc<crate::budget::Account>,
) -> ApiResult<Response> {
    let shards = state.root().registry.shards.clone();
    let n = state.shards.len();
    let (mut revs, start, mut inner, first_page) = match &opts.continue_token {
        Some(t) => {
            let c = Cursor::decode(t, &shards)?;
            (c.revs, c.shard, c.inner, false)
        }
        None => (asked.clone().unwrap_or_else(|| vec![0; n]), 0, None, true),
    };
    let mut warnings = Vec::new();
    let mut parts = Vec::new();
    // What the pages read from stores hold until the answer is rendered.
    let mut held = Vec::new();
    let (mut taken, mut next_at) = (0usize, None);
    for i in start..n {
        let (sh, name) = (&state.shards[i], &shards.names()[i]);
        let full = opts.limit > 0 && taken >= opts.limit;
        if full {
            // The page is full: this shard comes in a later page, at its revision of now, so that
            // every page is of one moment per shard, as pages of one store are.
            next_at.get_or_insert((i, None));
            if first_page && opts.rv_match != Some(RvMatch::Exact) {
                match tokio::time::timeout(PATIENCE, sh.registry.store.revision()).await {
                    Ok(Ok(r)) => revs[i] = r,
                    _ => {
                        revs[i] = 0;
                        warnings.push(left_out(name, "its revision could not be read"));
                    }
                }
            }
            continue;
        }
        let mut o = opts.clone();
        o.limit = if opts.limit > 0 { opts.limit - taken } else { 0 };
        o.clusters = filters[i].clone();
        o.continue_token = None;
        if i == start && inner.is_some() {
            o.continue_token = inner.take();
            (o.resource_version, o.rv_match) = (None, None);
        } else if !first_page && revs[i] > 0 {
            // A later page: the shard as it was when the first page was read.
            (o.resource_version, o.rv_match) = (Some(revs[i].to_string()), Some(RvMatch::Exact));
        } else if !first_page {
            (o.resource_version, o.rv_match) = (None, None);
        } else if asked.is_some() {
            o.resource_version = Some(revs[i].to_string());
        }
        match tokio::time::timeout(PATIENCE, list_one(sh, def, namespace, &o, account, &mut held)).await {
            Ok(Ok((part, count, rev, cont))) => {
                revs[i] = rev;
                taken += count;
                parts.push(part);
                if let Some(c) = cont {
                    next_at = Some((i, Some(c)));
                    taken = taken.max(opts.limit);
                }
            }
            Ok(Err(e)) if !down(&e) => return Err(e),
            // Part of a list already sent: leaving the shard out now would drop its objects from the
            // client's copy without a word; the client asks again.
            Ok(Err(e)) if !first_page => return Err(e),
            Err(_) if !first_page => return Err(ApiError::unavailable(left_out(name, "it did not answer in time"))),
            failed => {
                // Left out of a first page: `0` in the composite, so that a watch from it sends the
                // shard's objects once it answers, the client having none of them now.
                revs[i] = 0;
                let why = match failed {
                    Ok(Err(e)) => e.message.clone(),
                    _ => "it did not answer in time".into(),
                };
                warnings.push(left_out(name, &why));
            }
        }
    }
    let mut meta = json!({"resourceVersion": shards.encode(&revs)});
    if let Some((shard, inner)) = next_at {
        meta["continue"] = json!(Cursor { revs, shard, inner }.encode(&shards));
    }
    let raw = matches!(shape, respond::Shape::Plain)
        && !crate::registry::converts(def)
        && parts.iter().all(|p| matches!(p, Part::Cached(_)));
    let mut r = if raw {
        let mut items: Vec<Box<Items>> =
            parts.into_iter().filter_map(|p| if let Part::Cached(i) = p { Some(i) } else { None }).collect();
        items.reverse();
        // Each shard's objects in turn, as the connection takes them.
        respond::raw_list(def, &meta, move |take| {
            while let Some(last) = items.last_mut() {
                if !last.fill(take) {
                    return false;
                }
                items.pop();
            }
            true
        })
    } else {
        let mut values = Vec::new();
        for p in parts {
            match p {
                Part::Cached(items) => {
                    let mut v = items.values()?;
                    v.iter_mut().for_each(|o| crate::registry::from_storage(def, o));
                    values.extend(v);
                }
                Part::Read(v) => values.extend(v),
            }
        }
        respond::json(200, &respond::render_list(def, values, meta, shape, include))
    };
    respond::add_warnings(&mut r, &warnings);
    Ok(r)
}

type Response = http::Response<Body>;

/// One shard's watch, as its lines come: `Some(line)`, then `None` when it ends.
type Lines = std::pin::Pin<Box<dyn Stream<Item = (usize, Option<Bytes>)> + Send>>;

/// What a watch across shards needs to start each shard's part, again if it was down.
#[derive(Clone)]
pub struct WatchAcross {
    /// The resource.
    pub def: Arc<ResourceDef>,
    /// The namespace of the path.
    pub namespace: Option<String>,
    /// The request's options (its resourceVersion is replaced per shard).
    pub opts: ListOptions,
    /// How each object is rendered.
    pub render: Option<Render>,
    /// Who pays for what each part holds.
    pub account: Arc<crate::budget::Account>,
}

impl WatchAcross {
    /// Shard `i`'s watch from `rev` (`None`: from now, or its initial events when asked for).
    async fn start(
        &self,
        state: &Arc<AppState>,
        i: usize,
        filter: Option<ClusterFilter>,
        rev: Option<Revision>,
    ) -> ApiResult<WatchBody> {
        let sh = &state.shards[i];
        let mut opts = ListOptions { clusters: filter, ..self.opts.clone() };
        opts.resource_version = rev.map(|r| r.to_string());
        if rev == Some(0) {
            opts.rv_match = None;
        }
        let req = crate::watch::WatchRequest {
            account: Some(self.account.clone()),
            def: self.def.clone(),
            cluster: None,
            namespace: self.namespace.clone(),
            opts,
            render: self.render.clone(),
        };
        crate::watch::start(&sh.cache, sh.registry.clone(), req, state.shutdown.clone()).await
    }
}

/// A watch across every shard: each shard's events as they come, each object's resourceVersion the
/// composite after it, so that a client resumes from wherever it stopped. Returns the body and the
/// warnings for the shards left out for now.
pub async fn watch(
    state: &Arc<AppState>,
    w: WatchAcross,
    asked: Option<Vec<Revision>>,
    filters: Vec<Option<ClusterFilter>>,
) -> ApiResult<(WatchBody, Vec<String>)> {
    let shards = state.root().registry.shards.clone();
    let n = state.shards.len();
    let initial = w.opts.send_initial_events == Some(true);
    // Each shard from the client's point; with none, from now after its objects as ADDED, as a watch
    // of one store starts (`None`).
    let revs = asked.clone().unwrap_or_else(|| vec![0; n]);
    let (mut lines, mut warnings, mut awaited) = (Vec::<Lines>::new(), Vec::new(), vec![false; n]);
    for (i, filter) in filters.into_iter().enumerate() {
        let name = shards.names()[i].clone();
        let from = asked.as_ref().map(|r| r[i]);
        let started = match tokio::time::timeout(PATIENCE, w.start(state, i, filter.clone(), from)).await {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(e)) if !down(&e) => return Err(e),
            Ok(Err(e)) => Err(e.message.clone()),
            Err(_) => Err("it did not answer in time".to_string()),
        };
        match started {
            Ok(body) => {
                awaited[i] = initial;
                lines.push(tagged(i, body));
            }
            Err(why) => {
                warnings.push(left_out(&name, &why));
                // Tried again until it answers: from the client's point when it had one, else every
                // object it holds, as ADDED.
                let (state, w, rev) = (state.clone(), w.clone(), revs[i]);
                let mut stop = state.shutdown.clone();
                let later = async move {
                    loop {
                        tokio::select! {
                            _ = tokio::time::sleep(RETRY) => {}
                            _ = stop.wait_for(|s| *s) => return None,
                        }
                        let attempt = tokio::select! {
                            a = w.start(&state, i, filter.clone(), Some(rev)) => a,
                            _ = stop.wait_for(|s| *s) => return None,
                        };
                        match attempt {
                            Ok(body) => return Some(body),
                            Err(e) if !down(&e) => return Some(error_body(&e)),
                            Err(_) => continue,
                        }
                    }
                };
                lines.push(Box::pin(futures::stream::once(later).flat_map(move |b| match b {
                    Some(body) => tagged(i, body),
                    None => Box::pin(futures::stream::once(async move { (i, None) })),
                })));
            }
        }
    }
    let awaiting = awaited.iter().filter(|a| **a).count();
    let mut merge = Merge { shards, revs, awaited, awaiting, partial: vec![Vec::new(); n], ended: false };
    // Ends after an ERROR, or with the first shard's part to end (they share the timeout): the client
    // comes back from the last resourceVersion it saw, for every shard at once.
    let body = futures::stream::select_all(lines)
        .flat_map(move |(i, chunk)| futures::stream::iter(merge.take(i, chunk)))
        .take_while(|b| futures::future::ready(!b.is_empty()));
    Ok((Box::pin(body), warnings))
}

/// A body of one ERROR event.
fn error_body(e: &ApiError) -> WatchBody {
    let mut line = crate::proto::order::to_vec_untyped(
        "meta.k8s.io/v1",
        "WatchEvent",
        &json!({"type": "ERROR", "object": e.to_status()}),
    );
    line.push(b'\n');
    Box::pin(futures::stream::once(async move { Bytes::from(line) }))
}

fn tagged(i: usize, body: WatchBody) -> Lines {
    Box::pin(body.map(move |b| (i, Some(b))).chain(futures::stream::once(async move { (i, None) })))
}

/// Joins the shards' lines into one watch, each with the composite resourceVersion after it.
struct Merge {
    shards: Arc<Shards>,
    /// The latest revision each shard's part has sent.
    revs: Vec<Revision>,
    /// Shards whose initial events were asked for and have not all come; the end of them is sent
    /// once, after every such shard's (a shard that joins later sends its objects as they come).
    awaited: Vec<bool>,
    awaiting: usize,
    /// Each shard's line so far: a long object comes in pieces.
    partial: Vec<Vec<u8>>,
    ended: bool,
}

impl Merge {
    /// What to send for a chunk of shard `i` (`None`: its part ended): nothing yet, a line, or an
    /// empty chunk, which ends the watch.
    fn take(&mut self, i: usize, chunk: Option<Bytes>) -> Vec<Bytes> {
        if self.ended {
            return Vec::new();
        }
        let Some(chunk) = chunk else {
            self.ended = true;
            return vec![Bytes::new()];
        };
        // A line ends with a newline, which JSON strings never hold unescaped.
        if !chunk.ends_with(b"\n") || !self.partial[i].is_empty() {
            self.partial[i].extend_from_slice(&chunk);
            if !chunk.ends_with(b"\n") {
                return Vec::new();
            }
            let line = std::mem::take(&mut self.partial[i]);
            return self.line(i, &line);
        }
        self.line(i, &chunk)
    }

    fn line(&mut self, i: usize, line: &[u8]) -> Vec<Bytes> {
        let Ok(mut ev) = serde_json::from_slice::<Value>(line) else {
            return vec![Bytes::copy_from_slice(line)];
        };
        let kind = ev["type"].as_str().unwrap_or_default().to_string();
        if kind == "ERROR" {
            self.ended = true;
            return vec![Bytes::copy_from_slice(line), Bytes::new()];
        }
        let meta = &mut ev["object"]["metadata"];
        let own = meta["resourceVersion"].as_str().and_then(|r| r.parse::<Revision>().ok());
        if let Some(r) = own {
            self.revs[i] = self.revs[i].max(r);
        }
        if kind == "BOOKMARK" && meta["annotations"]["k8s.io/initial-events-end"] == "true" {
            if !std::mem::take(&mut self.awaited[i]) {
                // A shard that joined late: its objects went as they came; the end was sent.
                return Vec::new();
            }
            self.awaiting -= 1;
            if self.awaiting > 0 {
                return Vec::new();
            }
        }
        // The object's own revision as its shard's part (its initial events come in key order, not
        // revision order, and a write back through its cluster names its own), the others' latest.
        let mut revs = self.revs.clone();
        if let (Some(r), false) = (own, kind == "BOOKMARK") {
            revs[i] = r;
        }
        meta["resourceVersion"] = json!(self.shards.encode(&revs));
        // Written as the shard's watch wrote it, in kube's key order (`proto::order`).
        let mut out = crate::proto::order::to_vec_untyped("meta.k8s.io/v1", "WatchEvent", &ev);
        out.push(b'\n');
        vec![Bytes::from(out)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shards() -> Arc<Shards> {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn crate::storage::Store> =
            Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        Shards::new(vec![("b".into(), crate::registry::Registry::new(store, "/registry"))])
    }

    #[test]
    fn a_continue_key_names_every_shards_revision_and_where_the_list_stopped() {
        let s = shards();
        let c = Cursor { revs: vec![10, 3], shard: 1, inner: Some("abc".into()) };
        assert_eq!(Cursor::decode(&c.encode(&s), &s).unwrap(), c);
        let plain = crate::registry::encode_continue(5, "x");
        assert_eq!(Cursor::decode(&plain, &s).unwrap_err().code, 400, "one store's key is not one across shards");
    }

    #[test]
    fn each_event_carries_its_own_revision_and_the_others_latest_and_the_initial_end_waits_for_every_shard() {
        let mut m = Merge {
            shards: shards(),
            revs: vec![10, 3],
            awaited: vec![true, true],
            awaiting: 2,
            partial: vec![vec![], vec![]],
            ended: false,
        };
        let ev = |kind: &str, rv: u32, extra: &str| {
            Bytes::from(format!(
                "{{\"type\":\"{kind}\",\"object\":{{\"apiVersion\":\"example.com/v1\",\"kind\":\"Thing\",\"metadata\":{{\"labels\":{{\"resourceVersion\":\"{rv}\"}},\"name\":\"a\",\"resourceVersion\":\"{rv}\"{extra}}}}}}}\n"
            ))
        };
        let one = |out: Vec<Bytes>| -> Value {
            assert_eq!(out.len(), 1, "{out:?}");
            serde_json::from_slice(&out[0]).unwrap()
        };
        let v = one(m.take(1, Some(ev("ADDED", 7, ""))));
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "default:10,b:7");
        assert_eq!(v["object"]["metadata"]["labels"]["resourceVersion"], "7", "only the object's own");
        // Initial events come in key order: each names its own revision, never the highest seen.
        let v = one(m.take(1, Some(ev("ADDED", 5, ""))));
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "default:10,b:5");
        // A line in pieces is joined first.
        let whole = ev("MODIFIED", 12, "");
        assert!(m.take(0, Some(whole.slice(..20))).is_empty());
        let v = one(m.take(0, Some(whole.slice(20..))));
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "default:12,b:7");
        let end = ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}";
        assert!(m.take(0, Some(ev("BOOKMARK", 15, end))).is_empty(), "b has not finished its initial events");
        let v = one(m.take(1, Some(ev("BOOKMARK", 9, end))));
        assert_eq!(v["object"]["metadata"]["resourceVersion"], "default:15,b:9");
        assert!(m.take(1, Some(ev("BOOKMARK", 10, end))).is_empty(), "one end, sent once");
        // An ERROR is sent, and ends the watch.
        let error = Bytes::from_static(b"{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410}}\n");
        assert_eq!(m.take(0, Some(error.clone())), vec![error, Bytes::new()]);
        assert!(m.take(1, Some(ev("ADDED", 20, ""))).is_empty());
    }
}
