//! What a request asks, as kube-apiserver's request info reads it: its route (version, health,
//! discovery, OpenAPI, a resource), its query and whether it watches. Version and health need no
//! caller and are answered here.

use std::sync::Arc;

use http::Response;

use super::cluster::Target;
use super::{learned, teach, Inner, Next, Req};
use crate::http::handler::AppState;
use crate::http::respond::{self, Body};
use crate::request::{self, Query, Route};
use crate::status::ApiResult;

/// What the request asks.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    /// What its path addresses.
    pub route: Route,
    /// Its query, parsed once for every layer after.
    pub query: Query,
    /// Whether it is a watch (`?watch=true` or a `/watch/` path); a bad `watch` value is the handler's
    /// 400 to give, and until then the request costs what a read costs.
    pub watch: bool,
}

/// Whether this replica can serve: its default shard's store answers (root, every LogicalCluster and
/// the clusters placed there live on it). Every other shard is reported, in kube's verbose form, but
/// does not make the replica unready: every replica has the same shards, so taking one out of a load
/// balancer for a shard that is down would only take the clusters of the live shards with it; the
/// down shard's clusters answer 503 meanwhile.
async fn readyz(state: &AppState, verbose: bool) -> Response<Body> {
    // The answer is the default shard's: a plain probe waits for no other (one that is black-holed
    // would hold every probe for its store's timeout).
    if !verbose && state.root().registry.store.healthy().await {
        return respond::bytes(200, "text/plain; charset=utf-8", "ok");
    }
    let checks =
        state.shards.iter().map(|s| async move { (s.registry.shard.clone(), s.registry.store.healthy().await) });
    let results = futures::future::join_all(checks).await;
    let ready = results.first().is_some_and(|(_, ok)| *ok);
    let mut out = String::new();
    for (i, (shard, ok)) in results.iter().enumerate() {
        let name = if i == 0 { "etcd".to_string() } else { format!("etcd-shard-{shard}") };
        match (ok, i) {
            (true, _) => out.push_str(&format!("[+]{name} ok\n")),
            (false, 0) => out.push_str(&format!("[-]{name} failed: store is unreachable\n")),
            (false, _) => out.push_str(&format!(
                "[-]{name} failed: store is unreachable (its clusters answer 503; the others are served)\n"
            )),
        }
    }
    out.push_str(if ready { "readyz check passed" } else { "readyz check failed" });
    respond::bytes(if ready { 200 } else { 500 }, "text/plain; charset=utf-8", out)
}

/// The layer's function (see `edge::stack`).
pub async fn parse<S: Inner>(state: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let target = learned::<Target>(&req)?;
    let route = request::parse_route(&target.rest)?;
    match &route {
        Route::Version => return Ok(respond::json(200, &crate::http::handler::version())),
        Route::Health("readyz") => {
            let verbose = Query::parse(req.uri().query()).get("verbose").is_some();
            return Ok(readyz(&state, verbose).await);
        }
        Route::Health(_) => return Ok(respond::bytes(200, "text/plain; charset=utf-8", "ok")),
        _ => {}
    }
    let query = Query::parse(req.uri().query());
    let watch = match &route {
        Route::Resource(rp) => rp.watch_path || query.flag("watch").unwrap_or(false),
        _ => false,
    };
    teach(&mut req, RequestInfo { route, query, watch });
    next.run(req).await
}
