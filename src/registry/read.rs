//! Reads: get and list, with selectors, pagination (`limit`/`continue`) and the resourceVersion rules.

use base64::Engine;
use serde_json::{json, Value};

use super::options::{ListOptions, RvMatch};
use super::{Ctx, Registry};
use crate::resources::ResourceDef;
use crate::selector;
use crate::status::{ApiError, ApiResult};
use crate::storage::{RangeRequest, Revision, StoreError};

/// A page of a list.
#[derive(Debug, Clone)]
pub struct ListResult {
    /// Matching objects, decorated.
    pub items: Vec<Value>,
    /// The revision the list was read at (`metadata.resourceVersion`).
    pub revision: Revision,
    /// Token for the next page.
    pub continue_token: Option<String>,
}

/// Keys read from the store per step when a selector filters results.
const SCAN_PAGE: usize = 500;
/// Keys of the first read of a list without a limit: at most 96 MiB of the largest objects etcd takes.
const FIRST_WHOLE_PAGE: usize = 64;
/// The most keys one read of a filtered list asks for (kube's `maxLimit`).
const MAX_SCAN_PAGE: usize = 10_000;
/// A filtered list's reads grow no further than objects the size of the last page's fill this.
const MAX_SCAN_BYTES: usize = 4 << 20;

const CONTINUE_EXPIRED: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.";

pub(crate) fn encode_continue(rev: Revision, start: &str) -> String {
    let doc = json!({"v": "meta.k8s.io/v1", "rv": rev, "start": start});
    base64::engine::general_purpose::URL_SAFE.encode(doc.to_string())
}

pub(crate) fn decode_continue(token: &str) -> ApiResult<(Revision, String)> {
    let bad = |why: &str| ApiError::bad_request(format!("continue key is not valid: {why}"));
    let raw = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .or_else(|_| base64::engine::general_purpose::STANDARD.decode(token))
        .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    let doc: Value = serde_json::from_slice(&raw)
        .map_err(|_| bad("incorrect encoded start resourceVersion (version meta.k8s.io/v1)"))?;
    if doc["v"] != "meta.k8s.io/v1" {
        return Err(bad("server does not recognize this encoded version"));
    }
    let rev = doc["rv"].as_i64().filter(|r| *r > 0).ok_or_else(|| bad("incorrect encoded start resourceVersion"))?;
    let start = doc["start"].as_str().ok_or_else(|| bad("missing start"))?;
    if start.split('/').any(|s| s == ".." || s == ".") {
        return Err(bad("path traversal attempt detected"));
    }
    Ok((rev, start.to_string()))
}

/// Reject field selectors the resource does not support, as kube-apiserver does.
pub fn check_fields(def: &ResourceDef, opts: &ListOptions) -> ApiResult<()> {
    for f in opts.fields.fields() {
        if !selector::supported_field(&def.group, &def.plural, f) && custom_field(def, f).is_none() {
            return Err(ApiError::bad_request(format!("field label not supported: {f}")));
        }
    }
    Ok(())
}

/// Whether an object passes the label and field selectors.
pub fn matches(def: &ResourceDef, obj: &Value, opts: &ListOptions) -> bool {
    let cluster_ok = || {
        let cluster = obj["metadata"]["annotations"][crate::cluster::CLUSTER_ANNOTATION].as_str().unwrap_or("");
        opts.clusters.as_ref().is_none_or(|f| (f.0)(cluster))
    };
    cluster_ok()
        && (opts.labels.is_empty() || opts.labels.matches(crate::meta::labels(obj)))
        && (opts.fields.is_empty()
            || opts.fields.matches(&|f: &str| {
                selector::field_value(&def.group, &def.plural, obj, f).or_else(|| custom_value(def, obj, f))
            }))
}

/// One of a custom resource's `selectableFields`, by the name a selector gives it.
pub fn custom_field<'d>(def: &'d ResourceDef, field: &str) -> Option<&'d str> {
    def.custom.as_ref()?.selectable.iter().find(|s| *s == field).map(String::as_str)
}

/// Whether a selector reads any of a custom resource's own `selectableFields` (which a watch's
/// `selectable` parts leave out: they differ from one cluster's CRD to another's).
pub fn reads_custom_fields(def: &ResourceDef, opts: &ListOptions) -> bool {
    opts.fields.fields().iter().any(|f| custom_field(def, f).is_some())
}

/// A custom resource's selectable field's value as kube gives it to selectors: a string as it is,
/// a boolean or integer in its JSON form, an absent field empty.
fn custom_value(def: &ResourceDef, obj: &Value, field: &str) -> Option<String> {
    let path = custom_field(def, field)?;
    let found = path.split('.').try_fold(obj, |at, seg| at.get(seg));
    Some(match found {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Null) | None => String::new(),
        Some(v) => v.to_string(),
    })
}

/// What [`matches`] may read of an object (of any type: see `selector::field_paths`): what a watch's
/// selectors are tested against, worked out once per event for every watcher with selectors rather
/// than by each. Small: the labels, the name, and a few scalar fields.
pub fn selectable(obj: &Value) -> Value {
    let mut out = json!({});
    let mut copy = |path: &[&str]| {
        let Some(v) = path.iter().try_fold(obj, |at, seg| at.get(seg)) else { return };
        let Some((last, parents)) = path.split_last() else { return };
        let mut at = &mut out;
        for seg in parents {
            let Some(m) = at.as_object_mut() else { return };
            at = m.entry(*seg).or_insert_with(|| json!({}));
        }
        if let Some(m) = at.as_object_mut() {
            m.insert((*last).to_string(), v.clone());
        }
    };
    for path in [&["metadata", "name"][..], &["metadata", "namespace"], &["metadata", "labels"]] {
        copy(path);
    }
    copy(&["metadata", "annotations", crate::cluster::CLUSTER_ANNOTATION]);
    selector::field_paths().for_each(copy);
    out
}

impl Registry {
    /// GET one object.
    pub async fn get(&self, ctx: &Ctx<'_>, name: &str) -> ApiResult<Value> {
        let key = self.key(ctx, name);
        match self.store.get(&key).await? {
            Some(kv) => self.decode(ctx.def, ctx.cluster, &kv),
            None => Err(ApiError::not_found(&ctx.def.plural, &ctx.def.group, name)),
        }
    }

    /// LIST a collection in one cluster (`cluster = Some`) or every cluster (`None`).
    pub async fn list(
        &self,
        def: &ResourceDef,
        cluster: Option<&str>,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> ApiResult<ListResult> {
        self.list_charged(def, cluster, namespace, opts, &mut |_| Ok(())).await
    }

    /// [`Registry::list`], telling `charge` the stored bytes of the objects each page keeps before the
    /// next page is read: a tenant's list answered from the store is held whole until it is sent, so
    /// its caller charges it to the tenant's budget as it grows, and refuses it past the budget.
    pub async fn list_charged(
        &self,
        def: &ResourceDef,
        cluster: Option<&str>,
        namespace: Option<&str>,
        opts: &ListOptions,
        charge: &mut (dyn FnMut(usize) -> ApiResult<()> + Send),
    ) -> ApiResult<ListResult> {
        check_fields(def, opts)?;
        let prefix = self.collection(def, cluster, namespace);
        let (mut revision, mut start) = (None, None);
        let mut floor = None;
        if let Some(token) = &opts.continue_token {
            let (rev, s) = decode_continue(token)?;
            revision = Some(rev);
            start = Some(format!("{prefix}{s}"));
        } else if let Some(rv) = opts.resource_version.as_deref().filter(|rv| *rv != "0") {
            let n: Revision =
                rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
            let exact = opts.rv_match == Some(RvMatch::Exact) || (opts.rv_match.is_none() && opts.limit > 0);
            if exact {
                revision = Some(n);
            } else {
                floor = Some(n);
            }
        }
        let mut items = Vec::new();
        let mut continue_token = None;
        let mut read_at = revision;
        // Doubled after each read, as kube's etcd store does: a selective filter over many keys costs
        // reads of the logarithm of their number, not half of it. A list of everything is read in such
        // pages too (at the first page's revision), so that each is charged before the next is read:
        // concurrent lists of a large collection are refused once over the budget, not all held whole.
        let mut scan = match opts.limit {
            0 => FIRST_WHOLE_PAGE,
            limit => SCAN_PAGE.min(limit.saturating_mul(2)),
        };
        // Whether the list was begun again, once, after its store compacted the revision the list chose.
        let mut restarted = false;
        loop {
            let want = if opts.limit == 0 { scan } else { (opts.limit - items.len()).max(scan) };
            let read = RangeRequest { prefix: prefix.clone(), start: start.clone(), limit: want, revision: read_at };
            let page = self.store.range(read).await;
            // A later page at the revision this list chose, not the client: compacted meanwhile (or, in
            // the embedded store, too far behind), the list begins again at the store's revision of now,
            // as a list read at once would have been.
            if let (Err(StoreError::Compacted { .. }), None, false) = (&page, revision, restarted) {
                (restarted, items, start, read_at) = (true, Vec::new(), None, None);
                continue;
            }
            let page = page.map_err(|e| match e {
                StoreError::Compacted { .. } if opts.continue_token.is_some() => ApiError::expired(CONTINUE_EXPIRED),
                StoreError::Compacted { .. } => {
                    ApiError::expired("The resourceVersion for the provided list is too old.")
                }
                StoreError::FutureRevision { requested, current } => {
                    StoreError::FutureRevision { requested, current }.into()
                }
                other => other.into(),
            })?;
            read_at = Some(page.revision);
            // Grown as far as objects the size of this page's fill `MAX_SCAN_BYTES`: large objects keep
            // their pages as they were.
            let bytes: usize = page.kvs.iter().map(|kv| kv.value.len()).sum();
            let fit = MAX_SCAN_BYTES / (bytes / page.kvs.len().max(1)).max(1);
            scan = scan.max(scan.saturating_mul(2).min(MAX_SCAN_PAGE).min(fit));
            if let Some(f) = floor {
                if page.revision < f {
                    return Err(crate::storage::based::ahead(f, page.revision).into());
                }
            }
            let mut last_key = None;
            let mut kept = 0;
            for kv in &page.kvs {
                let obj_cluster = match cluster {
                    Some(c) => c,
                    None => match self.cluster_of(def, &kv.key) {
                        Some(c) => c,
                        None => continue,
                    },
                };
                let obj = self.decode(def, obj_cluster, kv)?;
                last_key = Some(kv.key.clone());
                // Wildcard keys are not narrowed by namespace (the cluster segment comes first).
                let in_namespace =
                    cluster.is_some() || namespace.is_none() || crate::meta::meta_str(&obj, "namespace") == namespace;
                if in_namespace && matches(def, &obj, opts) {
                    kept += kv.value.len();
                    items.push(obj);
                    if opts.limit > 0 && items.len() == opts.limit {
                        break;
                    }
                }
            }
            charge(kept)?;
            let full = opts.limit > 0 && items.len() == opts.limit;
            let consumed_all = last_key.as_ref() == page.kvs.last().map(|kv| &kv.key);
            if full {
                if page.more || !consumed_all {
                    let last = last_key.expect("full page has a last key");
                    let next = format!("{}\u{0}", &last[prefix.len()..]);
                    continue_token = Some(encode_continue(page.revision, &next));
                }
                break;
            }
            start = page.next_start();
            if start.is_none() {
                break;
            }
        }
        Ok(ListResult { items, revision: read_at.unwrap_or(0), continue_token })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let t = encode_continue(42, "default/x\u{0}");
        assert_eq!(decode_continue(&t).unwrap(), (42, "default/x\u{0}".to_string()));
        assert_eq!(decode_continue("!!!").unwrap_err().code, 400);
        let evil =
            base64::engine::general_purpose::URL_SAFE.encode(r#"{"v":"meta.k8s.io/v1","rv":3,"start":"../other/x"}"#);
        assert_eq!(decode_continue(&evil).unwrap_err().code, 400);
    }

    /// An object's selectable part passes every selector the object does, and fails every one it fails.
    #[test]
    fn the_selectable_part_selects_as_the_object() {
        let cases = [
            (
                "",
                "v1",
                "pods",
                json!({"metadata": {"name": "p", "namespace": "n", "labels": {"a": "b"}, "annotations": {"x": "y"}},
                "spec": {"nodeName": "n1", "containers": [{"name": "c"}]}, "status": {"podIPs": [{"ip": "10.0.0.1"}]}}),
            ),
            (
                "",
                "v1",
                "events",
                json!({"metadata": {"name": "e"}, "involvedObject": {"kind": "Pod", "name": "p"}, "source": {"component": "k"}, "type": "Normal"}),
            ),
            ("", "v1", "secrets", json!({"metadata": {"name": "s"}, "data": {"k": "dg=="}})),
        ];
        let selectors = [
            "labelSelector=a%3Db",
            "labelSelector=a%3Dc",
            "labelSelector=!a",
            "fieldSelector=metadata.name%3Dp",
            "fieldSelector=spec.nodeName%3Dn1",
            "fieldSelector=status.podIP%3D10.0.0.1",
            "fieldSelector=status.phase%3DPending",
            "fieldSelector=source%3Dk",
            "fieldSelector=involvedObject.name%3Dq",
            "fieldSelector=type%3DOpaque",
            "fieldSelector=metadata.namespace%21%3Dn",
        ];
        for (group, version, plural, obj) in cases {
            let def = crate::resources::find(group, version, plural).unwrap();
            let part = selectable(&obj);
            assert!(part.get("spec").is_none_or(|s| s.get("containers").is_none()), "{part}");
            for sel in selectors {
                let opts = ListOptions::from_query(&crate::request::Query::parse(Some(sel)), false).unwrap();
                if check_fields(&def, &opts).is_err() {
                    continue;
                }
                assert_eq!(matches(&def, &part, &opts), matches(&def, &obj, &opts), "{plural} {sel}");
            }
        }
    }

    /// An embedded store holding 200 ConfigMaps of cluster `t`'s `default` namespace, `c000` to `c199`,
    /// one in ten labelled `keep=true`; with its registry and the ConfigMaps' definition.
    async fn two_hundred_configmaps(
        dir: &std::path::Path,
    ) -> (std::sync::Arc<dyn crate::storage::Store>, Registry, std::sync::Arc<ResourceDef>) {
        let store: std::sync::Arc<dyn crate::storage::Store> =
            std::sync::Arc::new(crate::storage::embedded::EmbeddedStore::open(dir).unwrap());
        let registry = Registry::new(store.clone(), "/registry");
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        for i in 0..200 {
            let obj = serde_json::json!({"metadata": {"name": format!("c{i:03}"), "labels": {"keep": (i % 10 == 0).to_string()}}});
            let key = format!("{}c{i:03}", registry.collection(&def, Some("t"), Some("default")));
            store.create(&key, serde_json::to_vec(&obj).unwrap()).await.unwrap();
        }
        (store, registry, def)
    }

    /// A list without a limit is read in pages at the revision of its first; if that revision is
    /// compacted before its last page, it begins again at the store's revision of now, as one read of
    /// the whole would have been served, never 410 for a revision the client did not ask for.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_list_whose_revision_is_compacted_between_pages_begins_again() {
        let dir = tempfile::tempdir().unwrap();
        let (store, registry, def) = two_hundred_configmaps(dir.path()).await;
        let collection = registry.collection(&def, Some("t"), Some("default"));
        let everything = ListOptions::from_query(&crate::request::Query::parse(None), false).unwrap();
        let mut compacted = false;
        let list = registry
            .list_charged(&def, Some("t"), Some("default"), &everything, &mut |_| {
                if !std::mem::replace(&mut compacted, true) {
                    let (store, key) = (store.clone(), format!("{collection}late"));
                    tokio::task::block_in_place(|| {
                        tokio::runtime::Handle::current().block_on(async move {
                            let obj = serde_json::json!({"metadata": {"name": "late"}});
                            store.create(&key, serde_json::to_vec(&obj).unwrap()).await.unwrap();
                            store.compact(store.revision().await.unwrap()).await.unwrap();
                        })
                    });
                }
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(list.items.len(), 201, "the whole list, as of after the compaction");
        assert!(list.items.iter().any(|o| crate::meta::meta_str(o, "name") == Some("late")));
    }

    /// A list read from the store tells its caller what each page keeps before reading the next, and
    /// stops when the caller refuses (its tenant over budget).
    #[tokio::test]
    async fn a_list_is_charged_page_by_page_and_stops_when_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_store, registry, def) = two_hundred_configmaps(dir.path()).await;
        let query = crate::request::Query::parse(Some("labelSelector=keep%3Dtrue&limit=3"));
        let opts = ListOptions::from_query(&query, false).unwrap();
        let mut pages = Vec::new();
        let list = registry
            .list_charged(&def, Some("t"), Some("default"), &opts, &mut |bytes| {
                pages.push(bytes);
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!(list.items.len(), 3);
        assert!(pages.len() > 1, "{pages:?}");
        assert!(pages.iter().all(|b| *b > 0));
        let mut calls = 0;
        let refused = registry
            .list_charged(&def, Some("t"), Some("default"), &opts, &mut |_| {
                calls += 1;
                Err(ApiError::too_many_requests("over budget"))
            })
            .await;
        assert_eq!((refused.unwrap_err().code, calls), (429, 1));
        // A list of everything too: every object, at one revision, charged a page at a time.
        let everything = ListOptions::from_query(&crate::request::Query::parse(None), false).unwrap();
        let mut pages = Vec::new();
        let list = registry
            .list_charged(&def, Some("t"), Some("default"), &everything, &mut |bytes| {
                pages.push(bytes);
                Ok(())
            })
            .await
            .unwrap();
        assert_eq!((list.items.len(), list.continue_token), (200, None));
        assert!(pages.len() > 1, "{pages:?}");
        let names: Vec<&str> = list.items.iter().filter_map(|o| crate::meta::meta_str(o, "name")).collect();
        assert_eq!(names.first().copied(), Some("c000"));
        assert!(names.windows(2).all(|w| w[0] < w[1]), "in key order, none twice");
    }
}
