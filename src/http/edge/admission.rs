//! Admission: a request takes its place among the requests in flight, server-wide and in its
//! cluster's share (see `inflight`), and an account for the bytes its answer holds (see `budget`),
//! or is refused with 429; a read that is admitted ends at kube-apiserver's request deadline.

use std::sync::Arc;

use http::Response;

use super::authn::Authenticated;
use super::cluster::Target;
use super::info::RequestInfo;
use super::{exchange, learned, Inner, Next, Req};
use crate::http::handler::AppState;
use crate::http::inflight;
use crate::http::respond::Body;
use crate::status::{ApiError, ApiResult};

/// The layer's function (see `edge::stack`).
pub async fn admit<S: Inner>(state: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let (authn, target) = (learned::<Authenticated>(&req)?, learned::<Target>(&req)?);
    // Who authenticated decides the exemption, not whom they impersonate.
    let exempt = inflight::exempt(&authn.0);
    let kind = inflight::Kind::of(req.method(), learned::<RequestInfo>(&req)?.watch);
    let cluster = target.cluster.name();
    let own = cluster.and_then(|c| state.directory.limits(c));
    let ticket = state.inflight.admit_within(exempt, cluster.unwrap_or("*"), kind, own).await?;
    let account = state.budgets.account(cluster, exempt)?;
    let exchange = exchange(&req);
    if let Some(ticket) = ticket {
        let _ = exchange.ticket.set(ticket);
    }
    let _ = exchange.account.set(account.clone());
    req.extensions_mut().insert(account);
    drop((authn, target));
    if kind != inflight::Kind::ReadOnly {
        return next.run(req).await;
    }
    // Reads end at the deadline with kube-apiserver's timeout answer (see `REQUEST_TIMEOUT` for writes).
    tokio::time::timeout(crate::http::heavy::REQUEST_TIMEOUT, next.run(req)).await.unwrap_or_else(|_| {
        Err(ApiError::timeout("Timeout: request did not complete within requested timeout - context deadline exceeded"))
    })
}
