//! Subresources that act instead of showing fields: a pod's eviction and binding, and the ones that
//! reach a kubelet or a pod network (exec, attach, port-forward, log, proxy), which kgate answers with
//! a clear refusal because it runs no workloads.

use hyper::Response;
use serde_json::{json, Value};

use super::body;
use super::respond::{self, Body};
use crate::registry::{Ctx, DeleteOptions, Registry, WriteOptions};
use crate::request::Query;
use crate::status::{ApiError, ApiResult};

/// Subresources that need a kubelet or a network path to a pod, node or service.
const NEEDS_A_NODE: &[&str] = &["attach", "exec", "log", "portforward", "proxy"];

/// kube's answer to an action that succeeded: a `Status` with the code it was sent with.
fn success(code: u16) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code})
}

/// Serves `verb` on `<def>/<name>/<sub>`, a subresource the resource lists in discovery that is not a
/// field view (those go through update and patch).
/// `sent` is the request body with its content type.
pub(super) async fn serve(
    reg: &Registry,
    ctx: &Ctx<'_>,
    verb: &str,
    name: Option<&str>,
    sub: &str,
    q: &Query,
    sent: (Option<&str>, &[u8]),
) -> ApiResult<Response<Body>> {
    let def = ctx.def;
    let (content_type, body_bytes) = sent;
    let allowed = def.subresources.iter().find(|s| s.name == sub).is_some_and(|s| s.verbs.iter().any(|v| v == verb));
    let Some(name) = name.filter(|_| allowed) else {
        return Err(ApiError::method_not_allowed(verb, &format!("{}/{sub}", def.plural)));
    };
    // As kube: the object must exist before anything else is said about it.
    let current = reg.get(ctx, name).await?;
    if NEEDS_A_NODE.contains(&sub) {
        let what = def.kind.to_ascii_lowercase();
        return Err(ApiError::bad_request(format!(
            "{what} \"{name}\": {}/{sub} is not available: kgate serves the Kubernetes API only and runs no \
             workloads, so there is no kubelet or {what} network to reach",
            def.plural
        )));
    }
    match (def.group.as_str(), def.plural.as_str(), sub) {
        ("", "pods", "eviction") => {
            let eviction = decode(content_type, body_bytes)?;
            let opts = DeleteOptions::parse(eviction.get("deleteOptions"), q)?;
            reg.evict(ctx, name, &eviction, &opts).await?;
            Ok(respond::json(201, &success(201)))
        }
        ("", "pods", "binding") => {
            bind(reg, ctx, name, &current, &decode(content_type, body_bytes)?, q).await?;
            Ok(respond::json(201, &success(201)))
        }
        _ => Err(ApiError::method_not_allowed(verb, &format!("{}/{sub}", def.plural))),
    }
}

/// `POST .../bindings`: the older form of pods/binding, where the Binding names its pod.
pub(super) async fn create_binding(
    reg: &Registry,
    ctx: &Ctx<'_>,
    q: &Query,
    content_type: Option<&str>,
    body_bytes: &[u8],
) -> ApiResult<Response<Body>> {
    let binding = decode(content_type, body_bytes)?;
    let name = crate::meta::meta_str(&binding, "name").unwrap_or_default().to_string();
    let pods = crate::resources::find("", "v1", "pods").ok_or_else(ApiError::path_not_found)?;
    let pod_ctx = Ctx { def: &pods, ..*ctx };
    let pod = reg.get(&pod_ctx, &name).await?;
    bind(reg, &pod_ctx, &name, &pod, &binding, q).await?;
    Ok(respond::json(201, &success(201)))
}

fn decode(content_type: Option<&str>, bytes: &[u8]) -> ApiResult<Value> {
    Ok(body::decode_object(content_type, bytes)?.value)
}

/// Assigns a pod to a node as the scheduler's Binding does: once, and never to another node later.
pub(super) async fn bind(
    reg: &Registry,
    ctx: &Ctx<'_>,
    name: &str,
    pod: &Value,
    binding: &Value,
    q: &Query,
) -> ApiResult<()> {
    let node = binding["target"]["name"].as_str().unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "Binding",
            "",
            name,
            vec![crate::status::cause("FieldValueRequired", "target.name", "Required value")],
        ));
    }
    if crate::meta::meta_str(binding, "name").is_some_and(|n| n != name) {
        return Err(ApiError::bad_request("name in URL does not match name in Binding object"));
    }
    if crate::meta::meta_str(pod, "deletionTimestamp").is_some() {
        return Err(ApiError::conflict(
            "pods",
            "",
            name,
            &format!("pod {name} is being deleted, cannot be assigned to a host"),
        ));
    }
    if let Some(on) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
        return Err(ApiError::conflict("pods", "", name, &format!("pod {name} is already assigned to node \"{on}\"")));
    }
    let mut next = pod.clone();
    next["spec"]["nodeName"] = json!(node);
    reg.update(ctx, name, next, &WriteOptions::from_query(q)?, Some("binding")).await?;
    Ok(())
}
