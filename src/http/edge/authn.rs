//! Who sends a request: a verified client certificate wins (kube-apiserver tries x509 first); then a
//! bearer token, which is valid only in its own cluster and for kgate's audiences. Anything else is 401
//! before any work.

use std::sync::Arc;

use http::{header, Response};

use super::cluster::Target;
use super::{learned, teach, Inner, Next, Req};
use crate::auth::Identity;
use crate::http::handler::{AppState, ConnInfo};
use crate::http::respond::Body;
use crate::http::tokens;
use crate::status::{ApiError, ApiResult};

/// The caller as authenticated, before any impersonation: whom the audit log names and whose
/// exemption admission checks.
#[derive(Debug, Clone)]
pub struct Authenticated(pub Identity);

/// The layer's function (see `edge::stack`).
pub async fn authenticate<S: Inner>(state: Arc<AppState>, mut req: Req, next: Next<S>) -> ApiResult<Response<Body>> {
    let conn = req.extensions().get::<Arc<ConnInfo>>().cloned().ok_or_else(|| ApiError::internal("no connection"))?;
    let target = learned::<Target>(&req)?;
    let bearer = tokens::bearer(req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()));
    let who = match (&conn.identity, bearer) {
        (Some(id), _) => id.clone(),
        (None, Some(token)) => {
            match tokens::authenticate(&state, token, target.cluster.name(), &state.audiences).await? {
                Ok((who, _)) => who,
                Err(why) => {
                    tracing::debug!(reason = %why, "bearer token refused");
                    return Err(ApiError::unauthorized());
                }
            }
        }
        (None, None) => return Err(ApiError::unauthorized()),
    };
    teach(&mut req, Authenticated(who));
    next.run(req).await
}
