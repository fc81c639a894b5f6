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

/// The layer's function (see `edge::stack`).
pub async fn parse<S: Inner>(state: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let target = learned::<Target>(&req)?;
    let route = request::parse_route(&target.rest)?;
    match &route {
        Route::Version => return Ok(respond::json(200, &crate::http::handler::version())),
        Route::Health(which) => {
            let ok = *which != "readyz" || state.root().registry.store.healthy().await;
            return Ok(if ok {
                respond::bytes(200, "text/plain; charset=utf-8", "ok")
            } else {
                respond::bytes(
                    500,
                    "text/plain; charset=utf-8",
                    "[-]etcd failed: store is unreachable\nreadyz check failed",
                )
            });
        }
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
