//! Which logical cluster a request is for: the `/clusters/<name>/` prefix of its path, or the
//! `X-Kubernetes-Cluster` header (see `cluster::resolve` for how the two agree).

use std::sync::Arc;

use http::Response;

use super::{teach, Inner, Next, Req};
use crate::cluster::{self, ClusterTarget};
use crate::http::handler::AppState;
use crate::http::respond::Body;
use crate::status::ApiResult;

/// The cluster a request targets, and its path within that cluster.
#[derive(Debug, Clone)]
pub struct Target {
    /// One cluster, or every cluster (`*`).
    pub cluster: ClusterTarget,
    /// The path after the cluster's prefix.
    pub rest: String,
}

/// The layer's function (see `edge::stack`).
pub async fn resolve<S: Inner>(_: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    // A header that is not text names no cluster that exists: NUL is in no cluster's name.
    let header = req.headers().get(cluster::CLUSTER_HEADER).map(|v| v.to_str().unwrap_or("\u{0}").to_string());
    let (cluster, rest) = cluster::resolve(req.uri().path(), header.as_deref())?;
    let target = Target { cluster, rest: rest.to_string() };
    teach(&mut req, target);
    next.run(req).await
}
