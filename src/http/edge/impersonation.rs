//! Whom a request acts as: the identity its `Impersonate-*` headers name, if the caller's RBAC in the
//! cluster allows `impersonate` on each part (as kube-apiserver does); otherwise 403 and nothing
//! happens. Without those headers, the caller itself.

use std::sync::Arc;

use http::Response;

use super::authn::Authenticated;
use super::cluster::Target;
use super::{learned, teach, Inner, Next, Req};
use crate::auth::{Attributes, Identity, Impersonation};
use crate::cluster::ROOT;
use crate::http::handler::AppState;
use crate::http::respond::Body;
use crate::status::{ApiError, ApiResult};

/// The identity the request acts as: what authorization checks and what writes record.
#[derive(Debug, Clone)]
pub struct Caller(pub Identity);

/// The layer's function (see `edge::stack`).
pub async fn impersonate<S: Inner>(state: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let (authn, target) = (learned::<Authenticated>(&req)?, learned::<Target>(&req)?);
    let (authn, cluster) = (&authn.0, target.cluster.name().unwrap_or(ROOT));
    let who = match Impersonation::from_headers(req.headers()).map_err(ApiError::bad_request)? {
        None => authn.clone(),
        Some(imp) => {
            for (group, resource, namespace, name) in imp.checks() {
                // `userextras/<key>` is a resource with a subresource.
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, sub)) => (r, Some(sub)),
                    None => (resource.as_str(), None),
                };
                let attrs = Attributes {
                    verb: "impersonate",
                    group,
                    resource,
                    subresource,
                    namespace: namespace.as_deref(),
                    name: (!name.is_empty()).then_some(name.as_str()),
                };
                let authz = &state.serving(cluster).await?.authz;
                authz.authorize(authn, cluster, &attrs).await?.map_err(ApiError::forbidden)?;
            }
            let who = imp.identity();
            if let Some(record) = req.extensions().get::<Arc<crate::audit::Record>>() {
                if authn.user != who.user || authn.groups != who.groups {
                    record.impersonating(&who.user, &who.groups);
                }
            }
            who
        }
    };
    teach(&mut req, Caller(who));
    next.run(req).await
}
