//! The edge as a tower stack: each concern between a connection and the handler (the request's
//! figures, its logical cluster, what it asks, who sends it, its audit record, whom it acts as, its
//! admission) is one `Layer`, written as an async function in a file of its own and assembled top to
//! bottom in [`stack`], where the order is explained.
//!
//! Layers talk through the request's extensions: each adds what it learned (the cluster, the route,
//! the caller) for the layers inside it. What the answer must hold until its last byte is sent (its
//! place in flight, its account, its audit record) goes into the request's [`Exchange`], which the
//! response body keeps (see `meter`). Errors travel up the stack as `ApiError` (so every layer sees
//! the code it ended with) and become a `Status` in one place, [`serve`].

mod admission;
mod audit;
mod authn;
mod cluster;
mod impersonation;
mod info;
mod metrics;

pub use authn::Authenticated;
pub use cluster::Target;
pub use impersonation::Caller;
pub use info::RequestInfo;

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use http::{Request, Response};
use hyper::body::Incoming;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use super::handler::{AppState, ConnInfo};
use super::respond::{self, Body};
use crate::status::{ApiError, ApiResult};

/// A request as the edge carries it.
pub type Req = Request<Incoming>;

/// The whole stack, as one service.
pub type Edge = BoxCloneSyncService<Req, Response<Body>, ApiError>;

/// What one request's answer holds until it is sent, filled in by the layers that admit it. Each field
/// is set at most once, by one layer, and read after: a `OnceLock` is exactly that, without a lock
/// held by anyone.
#[derive(Default)]
pub struct Exchange {
    /// Its place among the requests in flight (none for the exempt); given back with the answer.
    pub ticket: OnceLock<super::inflight::Ticket>,
    /// The account its answer's bytes in flight are charged to (none before authentication).
    pub account: OnceLock<Arc<crate::budget::Account>>,
    /// Its audit record, which writes `ResponseComplete` once the answer is sent.
    pub audit: OnceLock<Arc<crate::audit::Record>>,
    /// The logical cluster whose figures it counts in (see `usage`): set once its caller is
    /// authenticated and the cluster is known to exist.
    pub cluster: OnceLock<String>,
    /// Its verb and resource, for the metrics, set by the handler.
    pub labels: OnceLock<Labels>,
}

/// A request's verb and resource as its metrics name them.
#[derive(Debug, Default)]
pub struct Labels {
    /// `get`, `list`, `watch`, ...
    pub verb: String,
    /// The resource, empty for a non-resource request.
    pub resource: String,
}

/// The request's exchange (see [`Exchange`]); every request through [`serve`] has one.
pub fn exchange(req: &Req) -> Arc<Exchange> {
    req.extensions().get::<Arc<Exchange>>().cloned().unwrap_or_default()
}

/// Put what a layer learned in the request's extensions for the layers inside it (see [`learned`]).
pub fn teach<T: Send + Sync + 'static>(req: &mut Req, what: T) {
    req.extensions_mut().insert(Arc::new(what));
}

/// What an outer layer learned (see [`teach`]), or an internal error naming what is missing (the
/// stack was assembled in the wrong order). Shared, not copied: every layer reads the same one.
pub fn learned<T: Send + Sync + 'static>(req: &Req) -> ApiResult<Arc<T>> {
    req.extensions()
        .get::<Arc<T>>()
        .cloned()
        .ok_or_else(|| ApiError::internal(format!("the edge has no {}", std::any::type_name::<T>())))
}

/// What a layer wraps: the rest of the stack.
pub trait Inner:
    Service<Req, Response = Response<Body>, Error = ApiError, Future: Send> + Clone + Send + Sync + 'static
{
}

impl<S> Inner for S where
    S: Service<Req, Response = Response<Body>, Error = ApiError, Future: Send> + Clone + Send + Sync + 'static
{
}

/// The rest of the stack, as a layer's function calls it.
pub struct Next<S>(S);

impl<S: Inner> Next<S> {
    /// Hand the request on.
    pub async fn run(self, req: Req) -> ApiResult<Response<Body>> {
        // Boxed: inline, each layer's future would hold all the layers inside it and the handler,
        // and every layer would copy that whole state (up to 19 KiB) as it starts the next one:
        // about 4% of a create's CPU went to those copies. Boxed, each layer's future is its own
        // state (about 1 KiB), for one allocation per layer.
        Box::pin(self.0.oneshot(req)).await
    }
}

/// A layer's function: of the shared state, the request and the rest of the stack. Every async fn of
/// that shape is one; the layers are generic over what they wrap, so the whole stack is one type, and
/// each layer's future holds the rest of the way in one allocation (see [`Next::run`]).
pub trait Concern<S>: Clone + Send + Sync + 'static {
    /// Its answer, to come.
    type Answer: Future<Output = ApiResult<Response<Body>>> + Send;
    /// Run it for one request.
    fn run(&self, state: Arc<AppState>, req: Req, next: Next<S>) -> Self::Answer;
}

impl<S, F, Fut> Concern<S> for F
where
    F: Fn(Arc<AppState>, Req, Next<S>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = ApiResult<Response<Body>>> + Send,
{
    type Answer = Fut;

    fn run(&self, state: Arc<AppState>, req: Req, next: Next<S>) -> Fut {
        self(state, req, next)
    }
}

/// A layer made of a [`Concern`].
#[derive(Clone)]
pub struct Step<F> {
    state: Arc<AppState>,
    f: F,
}

/// The layer that runs `f` for each request.
pub fn step<F>(state: &Arc<AppState>, f: F) -> Step<F> {
    Step { state: state.clone(), f }
}

impl<S: Inner, F: Concern<S>> Layer<S> for Step<F> {
    type Service = StepService<F, S>;

    fn layer(&self, inner: S) -> StepService<F, S> {
        StepService { state: self.state.clone(), f: self.f.clone(), inner }
    }
}

/// A [`Step`] around the rest of the stack.
#[derive(Clone)]
pub struct StepService<F, S> {
    state: Arc<AppState>,
    f: F,
    inner: S,
}

impl<S: Inner, F: Concern<S>> Service<Req> for StepService<F, S> {
    type Response = Response<Body>;
    type Error = ApiError;
    type Future = F::Answer;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ApiError>> {
        // Nothing here applies back-pressure: admission refuses or queues inside `admission`.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Req) -> F::Answer {
        self.f.run(self.state.clone(), req, Next(self.inner.clone()))
    }
}

/// The edge, outermost layer first.
pub fn stack(state: &Arc<AppState>) -> Edge {
    let handler = {
        let state = state.clone();
        // Boxed where it is made: the layer above boxes it too (see `Next::run`), but unboxed its
        // 12 KiB would still be copied into that box and again as `Oneshot` starts it.
        tower::service_fn(move |req| Box::pin(super::handler::serve(state.clone(), req)))
    };
    let edge = ServiceBuilder::new()
        // Outermost, so every answer is counted, refusals and errors included, with the time it took.
        .layer(step(state, metrics::observe))
        // The cluster and the route come from the path (and the cluster header) alone.
        .layer(step(state, cluster::resolve))
        // Version and health are answered here, before authentication, as kube serves them to anyone.
        .layer(step(state, info::parse))
        // Anything else is 401 before any work.
        .layer(step(state, authn::authenticate))
        // As kube's filter chain: audited as the authenticated user, before impersonation is tried,
        // so a refused impersonation is recorded too.
        .layer(step(state, audit::record))
        .layer(step(state, impersonation::impersonate))
        // After authentication and impersonation, before any work, as kube's max-in-flight filter:
        // whom the request acts for is known, and who authenticated decides the exemption.
        .layer(step(state, admission::admit))
        .service(handler);
    BoxCloneSyncService::new(edge)
}

/// Serve one request through `edge`; never fails: an error becomes its `Status` here. `request` is
/// its place on its connection, held by the response body (with the request's exchange) until sent.
pub async fn serve(
    edge: Edge,
    conn: Arc<ConnInfo>,
    mut req: Req,
    request: super::conn::InFlight,
) -> Result<Response<Body>, Infallible> {
    let exchange = Arc::new(Exchange::default());
    req.extensions_mut().insert(conn);
    req.extensions_mut().insert(exchange.clone());
    let resp = edge.oneshot(req).await.unwrap_or_else(|e| respond::error(&e));
    Ok(super::meter::wrap(resp, request, exchange))
}

/// The code an answer ends with, whether it is one yet or still an error.
pub fn code_of(r: &ApiResult<Response<Body>>) -> u16 {
    match r {
        Ok(resp) => resp.status().as_u16(),
        Err(e) => e.code,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future a layer's function returns, without calling it.
    fn layer_future<S: Inner, F: Fn(Arc<AppState>, Req, Next<S>) -> R, R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    /// The sizes of: what `S` answers with, `Next::run`'s future over it, and the metrics layer's.
    fn sizes<S: Inner>(_: &S) -> [usize; 3] {
        fn returned<S: Inner, F: Fn(Next<S>, Req) -> R, R>(_: &F) -> usize {
            std::mem::size_of::<R>()
        }
        [std::mem::size_of::<S::Future>(), returned(&Next::<S>::run), layer_future(&metrics::observe::<S>)]
    }

    #[test]
    fn a_layers_future_holds_its_own_state_not_the_rest_of_the_stack() {
        // A handler whose future holds 16 KiB across an await, as a large one does.
        let handler = tower::service_fn(|_: Req| async {
            let pad = [0u8; 16 * 1024];
            tokio::task::yield_now().await;
            std::hint::black_box(&pad);
            Err::<Response<Body>, ApiError>(ApiError::internal("not called"))
        });
        let [handler, next, layer] = sizes(&handler);
        assert!(handler >= 16 * 1024, "the handler's future is {handler} bytes");
        // Inline, each layer would copy the rest of the stack's state as it starts it.
        assert!(next <= 1024, "the rest of the stack is held in {next} bytes");
        assert!(layer <= 4096, "the metrics layer's future is {layer} bytes");
    }
}
