//! `kube-root-ca.crt` in every namespace, kept as kube-controller-manager's root CA publisher keeps it:
//! remade when deleted from a live namespace, its data reset when a write changes it, and rewritten
//! in every namespace of a cluster when the server's CA is not the one the cluster last got. Pods
//! mount it to trust the API server; a stale or missing one breaks every in-cluster client.
//!
//! The publisher is a controller in kube; here its effects come with the writes that call for them
//! (and with the cluster refresh a new CA starts), so no watch of every ConfigMap in the fleet is kept.

use serde_json::{json, Value};

use super::{Ctx, Registry, ROOT_CA_CONFIGMAP};
use crate::resources::ResourceDef;
use crate::status::ApiResult;
use crate::storage::{keys, StoreError};

/// The annotation kube's publisher sets on the ConfigMap, with its words.
const DESCRIPTION_ANNOTATION: &str = "kubernetes.io/description";
const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal \
    endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across \
    distributions of Kubernetes clusters.";

/// Namespaces read per store round trip when a cluster's are all visited.
const PAGE: usize = 500;

/// Whether `name` of `def` is the published ConfigMap.
fn is_root_ca(def: &ResourceDef, name: &str) -> bool {
    def.custom.is_none() && def.group.is_empty() && def.plural == "configmaps" && name == ROOT_CA_CONFIGMAP
}

/// Whether `cm` holds what the publisher writes for `ca`.
fn is_published(cm: &Value, ca: &str) -> bool {
    cm["data"] == json!({"ca.crt": ca}) && cm["metadata"]["annotations"][DESCRIPTION_ANNOTATION] == DESCRIPTION
}

/// Give `cm` the publisher's data and annotation, keeping whatever else it has (labels, other
/// annotations), as the publisher does.
fn publish_into(cm: &mut Value, ca: &str) {
    if let Some(m) = cm.as_object_mut() {
        m.insert("data".into(), json!({"ca.crt": ca}));
    }
    let meta = crate::meta::metadata_mut(cm);
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    if !ann.is_object() {
        *ann = json!({});
    }
    ann[DESCRIPTION_ANNOTATION] = json!(DESCRIPTION);
}

impl Registry {
    /// The published ConfigMap for namespace `ns`, when this registry publishes a CA.
    pub fn root_ca_configmap(&self, ns: &str) -> Option<Value> {
        let facts = self.published.as_ref()?;
        let mut cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ROOT_CA_CONFIGMAP,
            "namespace": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": crate::meta::now_rfc3339()}});
        publish_into(&mut cm, &facts.ca_pem);
        Some(cm)
    }

    /// Whether `name` of `def` is what this registry publishes.
    pub(super) fn publishes(&self, def: &ResourceDef, name: &str) -> bool {
        self.published.is_some() && is_root_ca(def, name)
    }

    /// A write of the published ConfigMap stores what the publisher would set it back to at once.
    pub(super) fn keep_published(&self, def: &ResourceDef, obj: &mut Value) {
        let Some(facts) = &self.published else { return };
        if is_root_ca(def, crate::meta::meta_str(obj, "name").unwrap_or_default()) {
            publish_into(obj, &facts.ca_pem);
        }
    }

    /// After `name` was deleted, make it again if it is the published ConfigMap and its namespace is
    /// live (a namespace being deleted is left to go); true when it was made again.
    pub(super) async fn republish_deleted(&self, ctx: &Ctx<'_>, name: &str) -> bool {
        let (Some(ns), true) = (ctx.namespace, is_root_ca(ctx.def, name)) else { return false };
        let Some(cm) = self.root_ca_configmap(ns) else { return false };
        match self.create_in_namespace(ctx.cluster, ns, "configmaps", ROOT_CA_CONFIGMAP, &cm).await {
            Ok(made) => made,
            Err(e) => {
                tracing::warn!(error = %e, cluster = ctx.cluster, namespace = ns, "publishing kube-root-ca.crt again");
                false
            }
        }
    }

    /// Bring `kube-root-ca.crt` of every namespace of `cluster` to the CA this server publishes: made
    /// where missing, rewritten where stale.
    pub async fn republish(&self, cluster: &str) -> ApiResult<()> {
        let Some(facts) = self.published.clone() else { return Ok(()) };
        let prefix = keys::collection(&self.prefix, "core", "namespaces", Some(cluster), None);
        let mut namespaces = Vec::new();
        crate::storage::range_pages::<StoreError>(&*self.store, &prefix, PAGE, |kvs| {
            namespaces.extend(kvs.iter().filter_map(|kv| kv.key.strip_prefix(&prefix).map(str::to_string)));
            Ok(())
        })
        .await?;
        for ns in namespaces {
            let key = keys::object(&self.prefix, "core", "configmaps", cluster, Some(&ns), ROOT_CA_CONFIGMAP);
            for _ in 0..super::write::MAX_RETRIES {
                let Some(kv) = self.store.get(&key).await? else {
                    if let Some(cm) = self.root_ca_configmap(&ns) {
                        self.create_in_namespace(cluster, &ns, "configmaps", ROOT_CA_CONFIGMAP, &cm).await?;
                    }
                    break;
                };
                let Ok(mut cm) = serde_json::from_slice::<Value>(&kv.value) else { break };
                if is_published(&cm, &facts.ca_pem) {
                    break;
                }
                publish_into(&mut cm, &facts.ca_pem);
                match self.store.update(&key, super::encode(&cm), kv.mod_revision).await {
                    Ok(_) => break,
                    Err(StoreError::Conflict { .. } | StoreError::NotFound) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_ca_configmap_is_set_back_and_keeps_its_labels() {
        let dir = tempfile::tempdir().unwrap();
        let store = std::sync::Arc::new(crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap());
        let facts = super::super::Published { ca_pem: "PEM".into(), ip: [127, 0, 0, 1].into(), port: 6443 };
        let reg = Registry::new(store, "/registry").publishing(facts);
        let cms = crate::resources::find("", "v1", "configmaps").unwrap();
        let mut cm = json!({"metadata": {"name": ROOT_CA_CONFIGMAP, "labels": {"a": "b"}}, "data": {"ca.crt": "mine", "x": "y"}});
        reg.keep_published(&cms, &mut cm);
        assert!(is_published(&cm, "PEM"), "{cm}");
        assert_eq!(cm["metadata"]["labels"]["a"], "b");
        let mut other = json!({"metadata": {"name": "other"}, "data": {"ca.crt": "mine"}});
        reg.keep_published(&cms, &mut other);
        assert_eq!(other["data"]["ca.crt"], "mine", "other ConfigMaps are the tenant's own");
        let secrets = crate::resources::find("", "v1", "secrets").unwrap();
        let mut secret = json!({"metadata": {"name": ROOT_CA_CONFIGMAP}, "data": {}});
        reg.keep_published(&secrets, &mut secret);
        assert_eq!(secret["data"], json!({}));
    }
}
