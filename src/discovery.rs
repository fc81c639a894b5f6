//! Discovery documents for one logical cluster: legacy (`APIVersions`, `APIGroupList`, `APIGroup`,
//! `APIResourceList`) and aggregated (`apidiscovery.k8s.io` v2 and v2beta1) with a content ETag.
//!
//! Documents depend only on the set of resources a cluster serves, so they are built once per set and
//! shared by every cluster with that set (all tenants without CRDs share one).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Value};
use sha2::{Digest, Sha512};

use crate::resources::ResourceDef;

/// A rendered document and its ETag.
#[derive(Debug, Clone)]
pub struct Doc {
    /// JSON bytes.
    pub body: Arc<Vec<u8>>,
    /// Quoted ETag (uppercase hex SHA-512 of the body), as kube-apiserver computes it.
    pub etag: String,
}

impl Doc {
    fn new(v: &Value) -> Self {
        let mut body = crate::proto::order::to_vec(v);
        let etag = format!("\"{}\"", hex::encode_upper(Sha512::digest(&body)));
        // Served as kube's encoder writes it, with a newline; the ETag is of the document itself.
        body.push(b'\n');
        Doc { body: Arc::new(body), etag }
    }
}

/// Which aggregated discovery version a client accepts, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregated {
    /// `apidiscovery.k8s.io/v2`.
    V2,
    /// `apidiscovery.k8s.io/v2beta1`.
    V2Beta1,
}

impl Aggregated {
    /// The version string.
    pub fn version(self) -> &'static str {
        match self {
            Aggregated::V2 => "v2",
            Aggregated::V2Beta1 => "v2beta1",
        }
    }

    /// The response Content-Type clients key on.
    pub fn content_type(self) -> String {
        format!("application/json;g=apidiscovery.k8s.io;v={};as=APIGroupDiscoveryList", self.version())
    }

    /// The first aggregated form listed in an Accept header.
    pub fn negotiate(accept: &str) -> Option<Aggregated> {
        for part in accept.split(',') {
            let mut pieces = part.split(';').map(str::trim);
            if pieces.next() != Some("application/json") {
                continue;
            }
            let (mut g, mut v, mut as_) = (None, None, None);
            for p in pieces {
                match p.split_once('=') {
                    Some(("g", x)) => g = Some(x),
                    Some(("v", x)) => v = Some(x),
                    Some(("as", x)) => as_ = Some(x),
                    _ => {}
                }
            }
            if g == Some("apidiscovery.k8s.io") && as_ == Some("APIGroupDiscoveryList") {
                match v {
                    Some("v2") => return Some(Aggregated::V2),
                    Some("v2beta1") => return Some(Aggregated::V2Beta1),
                    _ => {}
                }
            }
        }
        None
    }
}

/// Rank versions as Kubernetes does: GA before beta before alpha, higher numbers first.
pub fn version_priority(v: &str) -> (u8, i64, i64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<i64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let minor = |s: &str| s.parse::<i64>().unwrap_or(-1);
    if let Some(b) = tail.strip_prefix("beta") {
        return (2, major, minor(b));
    }
    if let Some(a) = tail.strip_prefix("alpha") {
        return (1, major, minor(a));
    }
    (0, 0, 0)
}

/// Every discovery document of one API set.
pub struct Discovery {
    /// `/api` legacy body without the server address (added per request).
    pub api_versions: Value,
    /// `/apis` legacy.
    pub apis: Doc,
    /// `/apis/<group>` legacy, by group.
    pub groups: BTreeMap<String, Doc>,
    /// `/api/v1` and `/apis/<g>/<v>`, by group-version path (`api/v1`, `apis/apps/v1`).
    pub resource_lists: BTreeMap<String, Doc>,
    /// Aggregated `/api` and `/apis`, v2 and v2beta1.
    pub aggregated: BTreeMap<(&'static str, bool), Doc>,
    /// The group/versions and their resources, for OpenAPI.
    pub by_gv: BTreeMap<(String, String), Vec<Arc<ResourceDef>>>,
}

/// Every subresource of `d` as (name, group, version, kind, verbs), sorted by name as kube lists them;
/// an empty group and version mean the parent's.
fn subresources(d: &ResourceDef) -> Vec<(&str, &str, &str, &str, Vec<&str>)> {
    const STATUS_VERBS: [&str; 3] = ["get", "patch", "update"];
    let mut out = Vec::new();
    if d.status {
        out.push(("status", "", "", d.kind.as_str(), STATUS_VERBS.to_vec()));
    }
    if d.scale.is_some() {
        out.push(("scale", "autoscaling", "v1", "Scale", STATUS_VERBS.to_vec()));
    }
    for s in &d.subresources {
        out.push((&s.name, &s.group, &s.version, &s.kind, s.verbs.iter().map(String::as_str).collect()));
    }
    out.sort_by_key(|s| s.0);
    out
}

fn resource_entry(d: &ResourceDef) -> Vec<Value> {
    let mut top = json!({
        "name": d.plural, "singularName": d.singular, "namespaced": d.namespaced, "kind": d.kind,
        "verbs": d.verbs,
    });
    if !d.short_names.is_empty() {
        top["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        top["categories"] = json!(d.categories);
    }
    if let Some(h) = &d.storage_version_hash {
        top["storageVersionHash"] = json!(h);
    }
    let mut out = vec![top];
    for (name, group, version, kind, verbs) in subresources(d) {
        let mut e = json!({"name": format!("{}/{name}", d.plural), "singularName": "", "namespaced": d.namespaced, "kind": kind, "verbs": verbs});
        if !group.is_empty() || !version.is_empty() {
            e["group"] = json!(group);
            e["version"] = json!(version);
        }
        out.push(e);
    }
    out
}

fn aggregated_resource(d: &ResourceDef) -> Value {
    let mut r = json!({
        "resource": d.plural,
        // As kube: a kind of the resource's own group-version is named without them.
        "responseKind": {"group": "", "version": "", "kind": d.kind},
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": d.verbs,
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    }
    let subs: Vec<Value> = subresources(d)
        .into_iter()
        .map(|(name, group, version, kind, verbs)| {
            json!({"subresource": name, "responseKind": {"group": group, "version": version, "kind": kind}, "verbs": verbs})
        })
        .collect();
    if !subs.is_empty() {
        r["subresources"] = Value::Array(subs);
    }
    r
}

impl Discovery {
    /// Build every document for a set of resources.
    pub fn build<'a>(defs: impl Iterator<Item = &'a Arc<ResourceDef>>) -> Self {
        let mut by_gv: BTreeMap<(String, String), Vec<Arc<ResourceDef>>> = BTreeMap::new();
        // Groups in the order first met, found through a set: a cluster may hold thousands of groups.
        let mut group_order: Vec<String> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for d in defs {
            if seen.insert(d.group.clone()) {
                group_order.push(d.group.clone());
            }
            by_gv.entry((d.group.clone(), d.version.clone())).or_default().push(d.clone());
        }
        // A group's versions, from the range of its keys in `by_gv` (ordered by group first).
        let versions_of = |g: &str| -> Vec<String> {
            let from = (g.to_string(), String::new());
            let mut vs: Vec<String> =
                by_gv.range(from..).take_while(|((gg, _), _)| gg == g).map(|((_, v), _)| v.clone()).collect();
            vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
            vs
        };
        let mut resource_lists = BTreeMap::new();
        for ((g, v), defs) in &by_gv {
            let gv = if g.is_empty() { v.clone() } else { format!("{g}/{v}") };
            let path = if g.is_empty() { format!("api/{v}") } else { format!("apis/{g}/{v}") };
            let resources: Vec<Value> = defs.iter().flat_map(|d| resource_entry(d)).collect();
            resource_lists.insert(
                path,
                Doc::new(
                    &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
                ),
            );
        }
        let mut groups = BTreeMap::new();
        let mut group_list = Vec::new();
        for g in group_order.iter().filter(|g| !g.is_empty()) {
            let vs: Vec<Value> =
                versions_of(g).iter().map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v})).collect();
            let group = json!({"name": g, "versions": vs, "preferredVersion": vs[0]});
            let mut doc = group.clone();
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            groups.insert(g.clone(), Doc::new(&doc));
            group_list.push(group);
        }
        let apis = Doc::new(&json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": group_list}));
        let mut aggregated = BTreeMap::new();
        for agg in [Aggregated::V2, Aggregated::V2Beta1] {
            for core in [true, false] {
                let items: Vec<Value> = group_order
                    .iter()
                    .filter(|g| g.is_empty() == core)
                    .map(|g| {
                        let versions: Vec<Value> = versions_of(g)
                            .iter()
                            .map(|v| {
                                let rs: Vec<Value> =
                                    by_gv[&(g.clone(), v.clone())].iter().map(|d| aggregated_resource(d)).collect();
                                json!({"version": v, "resources": rs, "freshness": "Current"})
                            })
                            .collect();
                        json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": versions})
                    })
                    .collect();
                let doc = json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{}", agg.version()), "metadata": {}, "items": items});
                aggregated.insert((agg.version(), core), Doc::new(&doc));
            }
        }
        Discovery {
            api_versions: json!({"kind": "APIVersions", "versions": ["v1"]}),
            apis,
            groups,
            resource_lists,
            aggregated,
            by_gv,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_client_go_accept() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(Aggregated::negotiate(accept), Some(Aggregated::V2));
        assert_eq!(Aggregated::negotiate("application/json"), None);
        assert_eq!(
            Aggregated::negotiate("application/json;as=APIGroupDiscoveryList;v=v2beta1;g=apidiscovery.k8s.io"),
            Some(Aggregated::V2Beta1)
        );
    }

    #[test]
    fn versions_sort_ga_first() {
        let mut v = vec!["v1alpha1", "v1beta2", "v2", "v1", "v1beta1"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha1"]);
    }

    #[test]
    fn documents_cover_every_served_group() {
        let d = Discovery::build(crate::resources::for_cluster("team-a"));
        assert!(d.groups.contains_key("apps"));
        assert!(!d.groups.contains_key(crate::resources::TENANCY_GROUP));
        let apps: Value = serde_json::from_slice(&d.resource_lists["apis/apps/v1"].body).unwrap();
        let names: Vec<&str> =
            apps["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
        assert!(names.contains(&"deployments/scale"));
        let agg: Value = serde_json::from_slice(&d.aggregated[&("v2", false)].body).unwrap();
        assert!(agg["items"].as_array().unwrap().iter().all(|g| !g["versions"].as_array().unwrap().is_empty()));
        let root = Discovery::build(crate::resources::for_cluster("root"));
        assert_ne!(root.apis.etag, d.apis.etag);
    }
}
