//! A request's figures: the server's metrics by verb, resource and code, and its logical cluster's
//! usage (see `usage`), recorded once its answer (or its error) is known.

use std::sync::Arc;
use std::time::Instant;

use http::Response;

use super::{code_of, exchange, Inner, Next, Req};
use crate::http::handler::AppState;
use crate::http::respond::Body;
use crate::status::ApiResult;

/// The layer's function (see `edge::stack`).
pub async fn observe<S: Inner>(state: Arc<AppState>, req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let started = Instant::now();
    let method = req.method().clone();
    let exchange = exchange(&req);
    let path = tracing::enabled!(tracing::Level::DEBUG).then(|| req.uri().path().to_string());
    let answer = next.run(req).await;
    let (code, elapsed) = (code_of(&answer), started.elapsed());
    let (verb, resource) = exchange.labels.get().map_or(("", ""), |l| (l.verb.as_str(), l.resource.as_str()));
    state.metrics.observe(&method, verb, resource, code, elapsed);
    if let Some(cluster) = exchange.cluster.get() {
        state.usage.record(cluster, verb, code, elapsed);
    }
    if let Some(path) = path {
        tracing::debug!(%method, %path, status = code, elapsed_ms = elapsed.as_millis() as u64, "request");
    }
    answer
}
