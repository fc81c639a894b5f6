//! `componentstatuses` as kube-apiserver's registry answers them (a read-only list built on each
//! request, never stored): what kgate has of the components kube reports. Its store is `etcd-0`,
//! healthy when it answers (the embedded store stands in for etcd); no scheduler or controller-manager
//! runs as a process of its own, so none is listed rather than one reported healthy that is not there.

use serde_json::{json, Value};

use super::respond::{self, Body, Shape};
use crate::resources::ResourceDef;
use crate::status::{ApiError, ApiResult};
use crate::table::IncludeObject;

/// The store's component name, as kube names its first etcd server.
const STORE: &str = "etcd-0";

/// A GET or LIST of componentstatuses.
pub async fn serve(
    store: &dyn crate::storage::Store,
    def: &ResourceDef,
    verb: &str,
    name: Option<&str>,
    shape: Shape,
    include: IncludeObject,
) -> ApiResult<http::Response<Body>> {
    let healthy = store.healthy().await;
    let status = component(STORE, healthy);
    match (verb, name) {
        ("get", Some(STORE)) => Ok(respond::json(200, &respond::render_object(def, &status, shape, include, true))),
        ("get", Some(other)) => Err(ApiError::not_found(&def.plural, &def.group, other)),
        ("list", None) => Ok(respond::json(200, &respond::render_list(def, vec![status], json!({}), shape, include))),
        _ => Err(ApiError::method_not_allowed(verb, &def.plural)),
    }
}

/// One component's status, as kube's `componentstatus` REST storage writes it.
fn component(name: &str, healthy: bool) -> Value {
    let condition = match healthy {
        true => json!({"type": "Healthy", "status": "True", "message": "ok"}),
        false => json!({"type": "Healthy", "status": "False", "error": "the store does not answer"}),
    };
    json!({"kind": "ComponentStatus", "apiVersion": "v1", "metadata": {"name": name, "creationTimestamp": null},
           "conditions": [condition]})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_reads_as_kubes() {
        let ok = component(STORE, true);
        assert_eq!(ok["conditions"][0], json!({"type": "Healthy", "status": "True", "message": "ok"}));
        assert_eq!(component(STORE, false)["conditions"][0]["status"], "False");
    }
}
