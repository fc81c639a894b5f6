//! The request's audit record (see `audit`): its `RequestReceived` event written as the policy says,
//! its `ResponseStarted` or `ResponseComplete` once the answer is known, in the authenticated user's
//! name, as kube-apiserver's audit filter does.

use std::sync::Arc;

use http::{header, Method, Response};

use super::authn::Authenticated;
use super::cluster::Target;
use super::info::RequestInfo;
use super::{code_of, exchange, learned, Inner, Next, Req};
use crate::audit::{Auditor, ObjectRef, Received, Record};
use crate::auth::Identity;
use crate::cluster::ROOT;
use crate::http::handler::{verb_of, AppState, ConnInfo};
use crate::http::respond::Body;
use crate::request::Route;
use crate::status::ApiResult;

/// The layer's function (see `edge::stack`).
pub async fn record<S: Inner>(state: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let Some(auditor) = &state.audit else { return next.run(req).await };
    let conn = req.extensions().get::<Arc<ConnInfo>>().cloned();
    let (target, info, authn) =
        (learned::<Target>(&req)?, learned::<RequestInfo>(&req)?, learned::<Authenticated>(&req)?);
    let peer = conn.and_then(|c| c.peer);
    let record = begin(auditor, peer, &req, &info, &target, &authn.0);
    // Not held across the rest of the stack: the handler takes the request info for its own.
    drop((target, info, authn));
    let Some(record) = record else { return next.run(req).await };
    // The handler that reads the body keeps it for the record (level Request and above); the answer's
    // body hands it what it sends (RequestResponse).
    req.extensions_mut().insert(record.clone());
    let exchange = exchange(&req);
    let _ = exchange.audit.set(record.clone());
    let answer = next.run(req).await;
    let watch = exchange.labels.get().is_some_and(|l| l.verb == "watch");
    record.responded(code_of(&answer), watch);
    answer
}

/// The audit record of a request, with its `RequestReceived` event written; `None` when the policy
/// does not record it.
fn begin(
    auditor: &Arc<Auditor>,
    peer: Option<std::net::SocketAddr>,
    req: &Req,
    info: &RequestInfo,
    target: &Target,
    authn: &Identity,
) -> Option<Arc<Record>> {
    let object = match &info.route {
        Route::Resource(rp) => Some(ObjectRef {
            group: rp.group.clone(),
            version: rp.version.clone(),
            resource: rp.resource.clone(),
            subresource: rp.subresource.clone().unwrap_or_default(),
            // As kube's request info: a namespace object is in its own namespace.
            namespace: match (&rp.namespace, rp.group.as_str(), rp.resource.as_str(), &rp.name) {
                (None, "", "namespaces", Some(n)) => n.clone(),
                (ns, ..) => ns.clone().unwrap_or_default(),
            },
            name: rp.name.clone().unwrap_or_default(),
        }),
        _ => None,
    };
    let verb = match &info.route {
        Route::Resource(rp) => verb_of(req.method(), rp, info.watch).unwrap_or("unknown"),
        // As kube: a non-resource request's verb is its method, lower-cased.
        _ => match *req.method() {
            Method::GET => "get",
            Method::HEAD => "head",
            Method::POST => "post",
            Method::PUT => "put",
            Method::PATCH => "patch",
            Method::DELETE => "delete",
            _ => "unknown",
        },
    };
    // The request URI names the logical cluster even when the header chose it.
    let path = req.uri().path();
    let query = req.uri().query().map(|q| format!("?{q}")).unwrap_or_default();
    let uri = match target.cluster.name() {
        Some(c) if !path.starts_with("/clusters/") && c != ROOT => format!("/clusters/{c}{path}{query}"),
        _ => format!("{path}{query}"),
    };
    Record::begin(
        auditor,
        Received {
            user: (&authn.user, &authn.groups),
            verb,
            uri: &uri,
            object: object.as_ref(),
            cluster: target.cluster.name().unwrap_or("*"),
            source_ip: peer.map(|p| p.ip().to_string()),
            user_agent: req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()),
        },
    )
}
