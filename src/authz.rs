//! Authorization: `system:masters` may do anything; everyone else is judged by Kubernetes RBAC of the
//! logical cluster the request targets, from an index built once per cluster and cached.
//!
//! The cache (read on every request, written on misses and invalidations) holds about `CAPACITY`
//! clusters and at most `CAPACITY_BYTES` of indexes: a tenant's RBAC objects decide its index's size,
//! so a count alone would let a few large ones fill the memory every tenant shares. It is sharded,
//! each shard's lock held only for a lookup or an insert, so requests for different clusters rarely
//! meet; when full it evicts by S3-FIFO, so a tenant reaching many clusters once does not push out the
//! indexes that busy clusters use on every request. One store watch per RBAC type, across every
//! cluster, drops a cluster's entry when any of its RBAC objects changes, so writes through other
//! replicas count too.

use std::sync::Arc;

use futures::StreamExt;
use serde_json::Value;

use crate::auth::{forbidden_message, Attributes, Identity};
use crate::rbac::{RbacIndex, Request, User};
use crate::registry::Registry;
use crate::resources;
use crate::status::ApiResult;
use crate::storage::{RangeRequest, WatchEvent};

/// Most clusters whose RBAC index is cached at once.
const CAPACITY: usize = 10_000;
/// Most bytes of cached RBAC indexes: a default cluster's is about 2 KiB.
const CAPACITY_BYTES: u64 = 256 << 20;
/// Shards of the cache of indexes.
const CACHE_SHARDS: usize = 8;
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const RBAC_TYPES: [&str; 4] = ["roles", "clusterroles", "rolebindings", "clusterrolebindings"];

/// Weighs a cached index by its bytes (and its key's), never 0.
#[derive(Clone)]
struct IndexBytes;

impl quick_cache::Weighter<String, Arc<RbacIndex>> for IndexBytes {
    fn weight(&self, cluster: &String, index: &Arc<RbacIndex>) -> u64 {
        (64 + cluster.len() + index.size_bytes()) as u64
    }
}

/// Decides requests.
pub struct Authorizer {
    registry: Registry,
    cache: quick_cache::sync::Cache<String, Arc<RbacIndex>, IndexBytes>,
    /// Bumped on every invalidation; an index built across a bump is not cached (it may be stale).
    epochs: crate::epochs::Epochs,
}

impl Authorizer {
    /// An authorizer over the registry's store; run `watch_invalidations` beside it.
    pub fn new(registry: Registry) -> Self {
        // Few shards: an entry heavier than its shard's part of the capacity is never cached, and a
        // large tenant's index must fit (each shard takes 32 MiB).
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(CAPACITY)
            .weight_capacity(CAPACITY_BYTES)
            .shards(CACHE_SHARDS)
            .build()
            .expect("the cache's options are valid");
        let cache = quick_cache::sync::Cache::with_options(options, IndexBytes, Default::default(), Default::default());
        Authorizer { registry, cache, epochs: Default::default() }
    }

    /// Allow or refuse (with kube-apiserver's forbidden message).
    pub async fn authorize(
        &self,
        who: &Identity,
        cluster: &str,
        attrs: &Attributes<'_>,
    ) -> ApiResult<Result<(), String>> {
        if who.is_master() {
            return Ok(Ok(()));
        }
        let index = self.index(cluster).await?;
        let req = Request::Resource {
            verb: attrs.verb,
            group: attrs.group,
            resource: attrs.resource,
            subresource: attrs.subresource,
            namespace: attrs.namespace,
            name: attrs.name,
        };
        Ok(if index.allows(&user(who), &req) { Ok(()) } else { Err(forbidden_message(who, attrs)) })
    }

    /// Non-resource requests (`/metrics`, ...).
    pub async fn authorize_path(&self, who: &Identity, cluster: &str, verb: &str, path: &str) -> ApiResult<bool> {
        if who.is_master() {
            return Ok(true);
        }
        Ok(self.index(cluster).await?.allows(&user(who), &Request::NonResource { verb, path }))
    }

    /// The rules a SelfSubjectRulesReview reports.
    pub async fn rules_for(
        &self,
        who: &Identity,
        cluster: &str,
        namespace: &str,
    ) -> ApiResult<(Vec<Value>, Vec<Value>)> {
        if who.is_master() {
            return Ok((
                vec![serde_json::json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]})],
                vec![serde_json::json!({"verbs": ["*"], "nonResourceURLs": ["*"]})],
            ));
        }
        Ok(self.index(cluster).await?.rules_for(&user(who), namespace))
    }

    /// Forget a cluster's index (after a write to its RBAC objects).
    pub fn invalidate(&self, cluster: &str) {
        self.epochs.bump(cluster);
        self.cache.remove(cluster);
    }

    async fn index(&self, cluster: &str) -> ApiResult<Arc<RbacIndex>> {
        // One build per cluster at a time: requests that miss together wait for it and share what it
        // built, rather than each reading every RBAC object of the cluster. A tenant's may weigh tens
        // of MiB, past what the cache keeps, and then every request is a miss. (A build dropped or
        // failed, or not kept for being stale, hands the next waiter the guard.)
        let guard = match self.cache.get_value_or_guard_async(cluster).await {
            Ok(hit) => return Ok(hit),
            Err(guard) => guard,
        };
        let epoch = self.epochs.of(cluster);
        let mut lists: Vec<Vec<Value>> = Vec::with_capacity(4);
        for plural in RBAC_TYPES {
            let def = resources::find(RBAC_GROUP, "v1", plural).expect("RBAC types are built in");
            let prefix = self.registry.collection(&def, Some(cluster), None);
            let page = self.registry.store.range(RangeRequest { prefix, ..Default::default() }).await?;
            let objs = page.kvs.iter().filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok()).collect();
            lists.push(objs);
        }
        let index = Arc::new(RbacIndex::build(&lists[0], &lists[1], &lists[2], &lists[3]));
        if self.epochs.of(cluster) == epoch {
            // Refused only when an invalidation took the placeholder out: then it is stale anyway.
            let _ = guard.insert(index.clone());
        }
        Ok(index)
    }

    /// Watch every cluster's RBAC objects and drop the index of a cluster whose RBAC changed.
    pub async fn watch_invalidations(self: Arc<Self>) {
        // Futures in this one task, not spawned tasks: aborting this task at shutdown must end them all
        // (spawned ones would outlive it and keep the store open).
        let mut tasks = Vec::new();
        for plural in RBAC_TYPES {
            let this = self.clone();
            tasks.push(async move {
                let def = resources::find(RBAC_GROUP, "v1", plural).expect("RBAC types are built in");
                let prefix = this.registry.collection(&def, None, None);
                loop {
                    let start = match this.registry.store.revision().await {
                        Ok(r) => r,
                        Err(_) => {
                            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                            continue;
                        }
                    };
                    // Anything may have changed while the watch was down.
                    this.epochs.bump_all();
                    this.cache.clear();
                    // Which cluster changed is all it needs: no previous values.
                    let Ok(mut w) = this.registry.store.watch_current(&prefix, start).await else {
                        // Not in a tight loop of reads and bumps while the store refuses it.
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        continue;
                    };
                    while let Some(Ok(ev)) = w.next().await {
                        let key = match &ev {
                            WatchEvent::Put { kv, .. } => kv.key.clone(),
                            WatchEvent::Delete { key, .. } => key.clone(),
                            WatchEvent::Progress(_) => continue,
                        };
                        if let Some(c) = this.registry.cluster_of(&def, &key) {
                            this.invalidate(c);
                        }
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
            });
        }
        futures::future::join_all(tasks).await;
    }
}

fn user(who: &Identity) -> User {
    User { name: who.user.clone(), groups: who.groups.clone() }
}

/// The roles RBAC's escalation prevention guards, by plural.
const GUARDED: [&str; 4] = ["roles", "clusterroles", "rolebindings", "clusterrolebindings"];

/// Whether writes to `plural` of `group` go through escalation prevention.
pub fn guards(group: &str, plural: &str) -> bool {
    group == RBAC_GROUP && GUARDED.contains(&plural)
}

/// A binding's `roleRef`: (apiGroup, kind, name).
pub fn role_ref(binding: &Value) -> Option<(String, String, String)> {
    let r = binding.get("roleRef")?;
    let group = r.get("apiGroup").and_then(Value::as_str).filter(|g| !g.is_empty()).unwrap_or(RBAC_GROUP);
    Some((group.to_string(), r.get("kind")?.as_str()?.to_string(), r.get("name")?.as_str()?.to_string()))
}

/// kube-apiserver's RBAC escalation prevention for one write to a Role, ClusterRole, RoleBinding or
/// ClusterRoleBinding, prepared before it (what the caller holds where the write applies, and for a
/// binding the rules of the role it references) and checked on the object the write would store.
#[derive(Debug)]
pub struct Escalation {
    plural: &'static str,
    user: User,
    /// Nothing to check: `system:masters`, or `escalate` on the role.
    exempt: bool,
    /// The caller's rules: cluster-wide, and in the write's namespace.
    owner: Vec<crate::rbac::PolicyRule>,
    binding: Option<Binding>,
}

/// What a binding write's check needs of the role it references.
#[derive(Debug)]
struct Binding {
    role_ref: Option<(String, String, String)>,
    /// The caller may `bind` the role.
    bind: bool,
    /// The role's rules, or why they could not be had (a missing role is a 404, as in kube).
    rules: ApiResult<Vec<crate::rbac::PolicyRule>>,
}

impl Authorizer {
    /// Prepare the escalation check of a write to `plural` in `cluster`, addressed at `namespace` and
    /// `name` (from the URL: a create has none), of a binding referencing `role_ref`.
    pub async fn escalation(
        &self,
        who: &Identity,
        cluster: &str,
        plural: &str,
        namespace: Option<&str>,
        name: Option<&str>,
        role_ref: Option<(String, String, String)>,
    ) -> ApiResult<Escalation> {
        let plural = GUARDED.into_iter().find(|p| *p == plural).unwrap_or("roles");
        let user = user(who);
        let namespaced = matches!(plural, "roles" | "rolebindings");
        let namespace = if namespaced { namespace.filter(|n| !n.is_empty()) } else { None };
        let mut check = Escalation { plural, user, exempt: who.is_master(), owner: Vec::new(), binding: None };
        if check.exempt {
            if plural.ends_with("bindings") {
                check.binding = Some(Binding { role_ref, bind: true, rules: Ok(Vec::new()) });
            }
            return Ok(check);
        }
        let index = self.index(cluster).await?;
        let attrs = |verb, resource, name| Request::Resource {
            verb,
            group: RBAC_GROUP,
            resource,
            subresource: None,
            namespace,
            name,
        };
        if !plural.ends_with("bindings") {
            check.exempt = index.allows(&check.user, &attrs("escalate", plural, name));
            if !check.exempt {
                check.owner = index.rules_of(&check.user, namespace);
            }
            return Ok(check);
        }
        let bind = role_ref.as_ref().is_some_and(|(group, kind, role)| {
            let resource = match kind.as_str() {
                "ClusterRole" => "clusterroles",
                "Role" => "roles",
                _ => return false,
            };
            let req = Request::Resource {
                verb: "bind",
                group,
                resource,
                subresource: None,
                namespace,
                name: Some(role.as_str()),
            };
            index.allows(&check.user, &req)
        });
        let rules = match (&role_ref, bind) {
            (_, true) | (None, _) => Ok(Vec::new()),
            (Some((_, kind, role)), false) => self.referenced_rules(cluster, namespace, kind, role).await,
        };
        check.owner = index.rules_of(&check.user, namespace);
        check.binding = Some(Binding { role_ref, bind, rules });
        Ok(check)
    }

    /// The rules of the role a binding references, read from the store as kube's rule resolver does.
    async fn referenced_rules(
        &self,
        cluster: &str,
        namespace: Option<&str>,
        kind: &str,
        name: &str,
    ) -> ApiResult<Vec<crate::rbac::PolicyRule>> {
        let read = |plural: &str, ns: Option<&str>| {
            let def = resources::find(RBAC_GROUP, "v1", plural).expect("RBAC types are built in");
            crate::storage::keys::object(&self.registry.prefix, def.storage_group(), plural, cluster, ns, name)
        };
        match kind {
            "Role" => {
                let Some(ns) = namespace else {
                    return Err(crate::status::ApiError::bad_request("Namespace parameter required."));
                };
                let kv = self.registry.store.get(&read("roles", Some(ns))).await?;
                let role = kv.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok());
                match role {
                    Some(r) => Ok(crate::rbac::parse_rules(r.get("rules"))),
                    None => Err(crate::status::ApiError::not_found("roles", RBAC_GROUP, name)),
                }
            }
            "ClusterRole" => {
                // Every ClusterRole, to resolve an aggregated one as authorization does.
                let def = resources::find(RBAC_GROUP, "v1", "clusterroles").expect("RBAC types are built in");
                let prefix = self.registry.collection(&def, Some(cluster), None);
                let page = self.registry.store.range(RangeRequest { prefix, ..Default::default() }).await?;
                let objs: Vec<Value> =
                    page.kvs.iter().filter_map(|kv| serde_json::from_slice::<Value>(&kv.value).ok()).collect();
                crate::rbac::cluster_role_rules(&objs, name)
                    .ok_or_else(|| crate::status::ApiError::not_found("clusterroles", RBAC_GROUP, name))
            }
            other => Err(crate::status::ApiError::bad_request(format!("unsupported role reference kind: {other:?}"))),
        }
    }
}

/// kube's CertificateApproval and CertificateSigning admission: approving a CertificateSigningRequest
/// through `approval` takes `approve`, and changing its certificate or conditions through `status`
/// takes `sign`, on its signer: `signers` in `certificates.k8s.io`, named by the request's stored
/// `signerName` or its domain's `domain/*`. Prepared before the write (the caller's index), checked
/// on the request as stored, so a write cannot dodge it by naming another signer.
#[derive(Debug)]
pub struct SignerCheck {
    user: User,
    /// `None` for `system:masters`, who may do anything.
    index: Option<Arc<RbacIndex>>,
    /// `approval` or `status`.
    subresource: &'static str,
}

/// The subresources of a CertificateSigningRequest that act for its signer.
const SIGNER_SUBRESOURCES: [&str; 2] = ["approval", "status"];

impl Authorizer {
    /// The signer check of a write through `subresource` of a CertificateSigningRequest, if it has one.
    pub async fn signer_check(
        &self,
        who: &Identity,
        cluster: &str,
        subresource: Option<&str>,
    ) -> ApiResult<Option<SignerCheck>> {
        let Some(subresource) = SIGNER_SUBRESOURCES.into_iter().find(|s| Some(*s) == subresource) else {
            return Ok(None);
        };
        let index = if who.is_master() { None } else { Some(self.index(cluster).await?) };
        Ok(Some(SignerCheck { user: user(who), index, subresource }))
    }
}

impl crate::registry::Admit for SignerCheck {
    fn admit(&self, old: Option<&Value>, new: &Value) -> ApiResult<()> {
        let (Some(old), Some(index)) = (old, &self.index) else { return Ok(()) };
        let verb = match self.subresource {
            "approval" => "approve",
            // Compared as kube's semantic equality does, to which an empty list is no list.
            _ if empty_as_none(&old["status"]["certificate"]) == empty_as_none(&new["status"]["certificate"])
                && empty_as_none(&old["status"]["conditions"]) == empty_as_none(&new["status"]["conditions"]) =>
            {
                return Ok(())
            }
            _ => "sign",
        };
        let signer = old["spec"]["signerName"].as_str().unwrap_or_default();
        let domain = format!("{}/*", signer.split('/').next().unwrap_or_default());
        let allows = |name: &str| {
            let req = Request::Resource {
                verb,
                group: "certificates.k8s.io",
                resource: "signers",
                subresource: None,
                namespace: None,
                name: Some(name),
            };
            index.allows(&self.user, &req)
        };
        if allows(signer) || allows(&domain) {
            return Ok(());
        }
        let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        Err(crate::status::ApiError::forbidden_object(
            "certificatesigningrequests",
            "certificates.k8s.io",
            name,
            format!("user not permitted to {verb} requests with signerName {signer:?}"),
        ))
    }
}

/// The plural an owner reference's group, version and kind name in the request's cluster, and
/// whether that type is namespaced.
pub type ResolveOwner = Box<dyn Fn(&str, &str, &str) -> Option<(String, bool)> + Send + Sync>;

/// kube's OwnerReferencesPermissionEnforcement admission: changing an object's ownerReferences takes
/// `delete` on the object (a create needs none: its writer could have left it unmade), and making a
/// reference block its owner's deletion takes `update` on the owner's `finalizers` subresource, since
/// it can hold the owner (and whoever deletes it in the foreground) back.
pub struct OwnerRefCheck {
    user: User,
    /// `None` for `system:masters`, who may do anything.
    index: Option<Arc<RbacIndex>>,
    /// The written object's group, plural and subresource, namespace and name (as the request named it).
    group: String,
    resource: String,
    subresource: Option<String>,
    namespace: Option<String>,
    name: Option<String>,
    resolve: ResolveOwner,
}

impl std::fmt::Debug for OwnerRefCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnerRefCheck").field("user", &self.user.name).field("resource", &self.resource).finish()
    }
}

impl Authorizer {
    /// The owner reference check of a write to `group`/`resource` (through `subresource`) in
    /// `cluster`, with `resolve` naming an owner's plural.
    #[allow(clippy::too_many_arguments)]
    pub async fn owner_ref_check(
        &self,
        who: &Identity,
        cluster: &str,
        group: &str,
        resource: &str,
        subresource: Option<&str>,
        namespace: Option<&str>,
        name: Option<&str>,
        resolve: ResolveOwner,
    ) -> ApiResult<OwnerRefCheck> {
        let index = if who.is_master() { None } else { Some(self.index(cluster).await?) };
        Ok(OwnerRefCheck {
            user: user(who),
            index,
            group: group.to_string(),
            resource: resource.to_string(),
            subresource: subresource.map(str::to_string),
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
            resolve,
        })
    }
}

/// An object's owner references.
fn owner_refs(obj: Option<&Value>) -> &[Value] {
    obj.and_then(|o| o.pointer("/metadata/ownerReferences")).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

impl crate::registry::Admit for OwnerRefCheck {
    fn admit(&self, old: Option<&Value>, new: &Value) -> ApiResult<()> {
        let Some(index) = &self.index else { return Ok(()) };
        // As kube: a pod's status is written by its kubelet, which sets no owners.
        if self.group.is_empty() && self.resource == "pods" && self.subresource.as_deref() == Some("status") {
            return Ok(());
        }
        let (before, after) = (owner_refs(old), owner_refs(Some(new)));
        if before == after {
            return Ok(());
        }
        let name = new.pointer("/metadata/name").and_then(Value::as_str).or(self.name.as_deref()).unwrap_or_default();
        let refuse = |why: String| {
            crate::status::ApiError::forbidden_object(&self.resource, &self.group, name, format!("{why}: , <nil>"))
        };
        let namespace = self.namespace.as_deref();
        if old.is_some() {
            let req = Request::Resource {
                verb: "delete",
                group: &self.group,
                resource: &self.resource,
                subresource: self.subresource.as_deref(),
                namespace,
                name: Some(name),
            };
            if !index.allows(&self.user, &req) {
                return Err(refuse("cannot set an ownerRef on a resource you can't delete".into()));
            }
        }
        let blocks = |r: &Value| r["blockOwnerDeletion"] == Value::Bool(true);
        for r in after.iter().filter(|r| blocks(r)) {
            if before.iter().any(|b| blocks(b) && b["uid"] == r["uid"]) {
                continue;
            }
            let api_version = r["apiVersion"].as_str().unwrap_or_default();
            let kind = r["kind"].as_str().unwrap_or_default();
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let Some((plural, namespaced)) = (self.resolve)(group, version, kind) else {
                return Err(refuse(format!(
                    "cannot set blockOwnerDeletion in this case because cannot find RESTMapping for APIVersion {api_version} Kind {kind}"
                )));
            };
            let req = Request::Resource {
                verb: "update",
                group,
                resource: &plural,
                subresource: Some("finalizers"),
                // A cluster-scoped owner is checked as kube checks it, with no namespace: only a
                // ClusterRoleBinding grants it, not a namespace's admin.
                namespace: if namespaced { namespace } else { None },
                name: r["name"].as_str(),
            };
            if !index.allows(&self.user, &req) {
                return Err(refuse(
                    "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// `None` for a value that is absent, null, or an empty list or string.
fn empty_as_none(v: &Value) -> Option<&Value> {
    match v {
        Value::Null => None,
        Value::Array(a) if a.is_empty() => None,
        Value::String(s) if s.is_empty() => None,
        v => Some(v),
    }
}

/// kube's validation of a binding's roleRef: RBAC's group (empty means it), a Role or ClusterRole, a name.
/// (The authorizer resolves a roleRef by kind and name alone: one naming another group must not be
/// stored, or `bind` granted on that group would bind an RBAC role.)
fn validate_role_ref(kind: &str, name: &str, binding: &Value) -> ApiResult<()> {
    let r = &binding["roleRef"];
    let text = |k: &str| r[k].as_str().unwrap_or_default();
    let mut causes = Vec::new();
    if !text("apiGroup").is_empty() && text("apiGroup") != RBAC_GROUP {
        causes.push(crate::status::cause(
            "FieldValueNotSupported",
            "roleRef.apiGroup",
            format!("Unsupported value: {:?}: supported values: \"{RBAC_GROUP}\"", text("apiGroup")),
        ));
    }
    if !matches!(text("kind"), "Role" | "ClusterRole") {
        causes.push(crate::status::cause(
            "FieldValueNotSupported",
            "roleRef.kind",
            format!("Unsupported value: {:?}: supported values: \"Role\", \"ClusterRole\"", text("kind")),
        ));
    }
    if text("name").is_empty() {
        causes.push(crate::status::cause("FieldValueRequired", "roleRef.name", "Required value"));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(crate::status::ApiError::invalid(kind, RBAC_GROUP, name, causes))
    }
}

/// Whether `new` differs from `old` only in what garbage collection changes (finalizers, owner
/// references) and what the server keeps: such writes are not checked, as in kube.
fn gc_only(old: &Value, new: &Value) -> bool {
    let norm = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            for k in ["finalizers", "ownerReferences", "resourceVersion", "managedFields", "generation"] {
                m.remove(k);
            }
        }
        crate::registry::strip_derived(&mut v);
        v
    };
    norm(old) == norm(new)
}

impl crate::registry::Admit for Escalation {
    fn admit(&self, old: Option<&Value>, new: &Value) -> ApiResult<()> {
        let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let binding_kind = if self.plural == "rolebindings" { "RoleBinding" } else { "ClusterRoleBinding" };
        // A changed roleRef is refused by the type's validation, after this check, as in kube.
        if self.binding.is_some() {
            validate_role_ref(binding_kind, name, new)?;
        }
        if self.exempt || old.is_some_and(|old| gc_only(old, new)) {
            return Ok(());
        }
        let forbidden = |why: String| crate::status::ApiError::forbidden_object(self.plural, RBAC_GROUP, name, why);
        let Some(binding) = &self.binding else {
            let granted = crate::rbac::parse_rules(new.get("rules"));
            crate::rbac::confirm_no_escalation(&self.user, &self.owner, &granted).map_err(forbidden)?;
            let aggregated = crate::rbac::aggregates(new) || old.is_some_and(crate::rbac::aggregates);
            if self.plural == "clusterroles" && aggregated {
                crate::rbac::confirm_no_escalation(&self.user, &self.owner, &crate::rbac::full_authority())
                    .map_err(|_| forbidden("must have cluster-admin privileges to use the aggregationRule".into()))?;
            }
            return Ok(());
        };
        let wanted = role_ref(new);
        if wanted != binding.role_ref {
            // The check was prepared for the role the request named: one that differs is refused, in
            // the words of the type's validation when it is a change of the stored binding's.
            let mut causes = old.map(|o| crate::registry::update_errors(binding_kind, o, new)).unwrap_or_default();
            if causes.is_empty() {
                causes.push(crate::status::cause(
                    "FieldValueInvalid",
                    "roleRef",
                    "Invalid value: cannot change roleRef",
                ));
            }
            return Err(crate::status::ApiError::invalid(binding_kind, RBAC_GROUP, name, causes));
        }
        if binding.bind || wanted.is_none() {
            return Ok(());
        }
        let rules = binding.rules.as_ref().map_err(Clone::clone)?;
        crate::rbac::confirm_no_escalation(&self.user, &self.owner, rules).map_err(forbidden)
    }
}
