//! The handler at the bottom of the edge (`edge`): for a request whose cluster, route and caller the
//! layers above learned and whose admission they gave, discovery, OpenAPI, metrics or a resource
//! verb, authorized against the cluster's RBAC. Its errors rise through the edge to become a Status.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use dashmap::DashMap;
use futures::StreamExt;
use http::{header, Method, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{json, Value};

use super::body;
use super::edge::{learned, Caller, Labels, RequestInfo, Target};
use super::inflight::{InFlight, Limits};
use super::respond::{self, Body};
use crate::auth::{self, Identity};
use crate::authz::Authorizer;
use crate::cluster::{ClusterTarget, ROOT};
use crate::discovery::{Aggregated, Discovery};
use crate::metrics::Metrics;
use crate::patch::PatchType;
use crate::registry::{Ctx, DeleteOptions, ListOptions, Registry, WriteOptions};
use crate::request::{Query, ResourcePath, Route};
use crate::resources::{self, ResourceDef};
use crate::status::{ApiError, ApiResult};
use crate::tenancy::Directory;
use crate::token::Signer;

/// The Kubernetes version kgate serves; kubectl's dispatcher picks its build from `minor`.
pub const KUBE_MAJOR: &str = "1";
/// See `KUBE_MAJOR`.
pub const KUBE_MINOR: &str = "33";

/// What serves the clusters of one shard (see `shard`): their objects, the watch cache over them,
/// their CRDs and their RBAC.
pub struct Serving {
    /// Objects.
    pub registry: Registry,
    /// RBAC decisions.
    pub authz: Arc<Authorizer>,
    /// The watch cache: every watch, and the reads it can serve.
    pub cache: Arc<crate::watch::cache::WatchCache>,
    /// Every cluster's CRDs: the custom resources each serves.
    pub crds: Arc<CrdIndex>,
}

/// What every request handler shares.
pub struct AppState {
    /// Each shard's serving parts, the default shard's (which holds root) first.
    pub shards: Vec<Serving>,
    /// Which logical clusters exist.
    pub directory: Directory,
    /// Flips to true on SIGTERM/SIGINT; watches end when it does.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// Request metrics.
    pub metrics: Metrics,
    /// Signs and verifies ServiceAccount tokens.
    pub signer: Signer,
    /// Requests and watches in flight, server-wide and by cluster.
    pub inflight: Arc<InFlight>,
    /// Bytes that answers being sent hold, server-wide and by cluster.
    pub budgets: Arc<crate::budget::Budgets>,
    /// Where patches and large writes run, off the async workers.
    pub heavy: super::heavy::Heavy,
    /// The audiences a ServiceAccount token must name one of to authenticate to the API.
    pub audiences: Vec<String>,
    /// Tokens whose account and bound object were found in the store lately.
    pub token_checks: Arc<super::token_checks::TokenChecks>,
    /// The audit log, when one is configured.
    pub audit: Option<Arc<crate::audit::Auditor>>,
    /// Each logical cluster's request figures (bounded; see `usage`).
    pub usage: Arc<crate::usage::Usage>,
    /// Discovery for root and for every other cluster (built-ins only differ by the tenancy types).
    discovery: [OnceLock<Discovery>; 2],
    /// OpenAPI v3 documents by (root?, gv path), with their hash.
    openapi: DashMap<(bool, String), OpenApiDoc>,
}

use crate::crd::{ClusterDocs, CrdIndex, OpenApiDoc};

/// A cluster's discovery: the shared built-in one, or its own when it has CRDs.
enum Disc<'a> {
    Shared(&'a Discovery),
    Custom(Arc<ClusterDocs>),
}

impl std::ops::Deref for Disc<'_> {
    type Target = Discovery;
    fn deref(&self) -> &Discovery {
        match self {
            Disc::Shared(d) => d,
            Disc::Custom(c) => &c.discovery,
        }
    }
}

/// The connection a request came on.
#[derive(Debug, Clone, Default)]
pub struct ConnInfo {
    /// From a verified client certificate.
    pub identity: Option<Identity>,
    /// The client's address.
    pub peer: Option<std::net::SocketAddr>,
    /// The `host:port` clients reach us at (for `serverAddressByClientCIDRs`).
    pub server_address: String,
}

impl AppState {
    /// New shared state.
    pub fn new(
        registry: Registry,
        directory: Directory,
        shutdown: tokio::sync::watch::Receiver<bool>,
        metrics: Metrics,
        authz: Arc<Authorizer>,
        signer: Signer,
        crds: Arc<CrdIndex>,
    ) -> Self {
        let cache = crate::watch::cache::WatchCache::new(registry.clone(), metrics.cache.clone(), shutdown.clone());
        AppState {
            shards: vec![Serving { registry, authz, cache, crds }],
            inflight: InFlight::new(Limits::default(), &metrics.inflight),
            budgets: crate::budget::Budgets::new(
                Default::default(),
                metrics.bytes_in_flight.clone(),
                metrics.inflight.refused.clone(),
            ),
            heavy: Default::default(),
            audiences: super::tokens::default_audiences(),
            token_checks: Default::default(),
            audit: None,
            usage: Arc::new(crate::usage::Usage::new(crate::usage::DEFAULT_TOP)),
            directory,
            shutdown,
            metrics,
            signer,
            discovery: [OnceLock::new(), OnceLock::new()],
            openapi: DashMap::new(),
        }
    }

    /// Serve the shards after the default one too, each from its registry, CRD index and RBAC, in the
    /// order of `Shards::names`; their watch caches share the default one's bound on history.
    pub fn with_shards(mut self, others: Vec<(Registry, Arc<CrdIndex>, Arc<Authorizer>)>) -> Self {
        for (registry, crds, authz) in others {
            let cache = self.root().cache.alongside(registry.clone());
            self.shards.push(Serving { registry, authz, cache, crds });
        }
        self
    }

    /// The default shard's parts: root's, and what serves requests of no one cluster.
    pub fn root(&self) -> &Serving {
        &self.shards[0]
    }

    /// What serves `cluster`: its shard's parts, the default shard's for root and for a cluster that
    /// does not exist (nothing is found there), 503 for one on a shard this server is not given.
    pub async fn serving(&self, cluster: &str) -> ApiResult<&Serving> {
        match self.directory.locate(cluster).await? {
            None => Ok(self.root()),
            Some(placed) => self.at(placed, cluster).await,
        }
    }

    async fn at(&self, placed: crate::shard::Placed, cluster: &str) -> ApiResult<&Serving> {
        match placed {
            crate::shard::Placed::At(i) => {
                self.shards.get(i).ok_or_else(|| ApiError::internal("shard index out of range"))
            }
            crate::shard::Placed::Unknown => {
                let root = &self.root().registry;
                let key = crate::storage::keys::object(
                    &root.prefix,
                    resources::TENANCY_GROUP,
                    "logicalclusters",
                    ROOT,
                    None,
                    cluster,
                );
                let found = root.store.get(&key).await?;
                let obj = found.and_then(|kv| serde_json::from_slice::<Value>(&kv.value).ok()).unwrap_or_default();
                Err(crate::tenancy::unserved(crate::shard::of(&obj).unwrap_or("?")))
            }
        }
    }

    /// These audiences for ServiceAccount tokens, instead of the defaults.
    pub fn with_audiences(mut self, audiences: Vec<String>) -> Self {
        if !audiences.is_empty() {
            self.audiences = audiences;
        }
        self
    }

    /// This audit log.
    pub fn with_audit(mut self, audit: Option<Arc<crate::audit::Auditor>>) -> Self {
        self.audit = audit;
        self
    }

    /// Name this many of the busiest clusters in root's `/metrics`; `accounting` off records no
    /// cluster's figures at all.
    pub fn with_usage(mut self, top: usize, accounting: bool) -> Self {
        self.usage = Arc::new(match accounting {
            true => crate::usage::Usage::new(top),
            false => crate::usage::Usage::disabled(),
        });
        self
    }

    /// These limits on what may be in flight, instead of the defaults.
    pub fn with_limits(mut self, limits: Limits, bytes: crate::budget::Limits) -> Self {
        self.inflight = InFlight::new(limits, &self.metrics.inflight);
        self.budgets = crate::budget::Budgets::new(
            bytes,
            self.metrics.bytes_in_flight.clone(),
            self.metrics.inflight.refused.clone(),
        );
        self
    }

    fn discovery<'a>(&'a self, sh: &Serving, cluster: &str) -> Disc<'a> {
        if let Some(docs) = sh.crds.docs(cluster) {
            return Disc::Custom(docs);
        }
        let root = cluster == ROOT;
        Disc::Shared(
            self.discovery[usize::from(root)].get_or_init(|| Discovery::build(resources::for_cluster(cluster))),
        )
    }
}

/// The handler at the bottom of the edge (see `edge::stack`): what the layers above learned about the
/// request, then its answer.
pub async fn serve(state: Arc<AppState>, mut req: Request<Incoming>) -> ApiResult<Response<Body>> {
    let missing = |what: &str| ApiError::internal(format!("the edge has no {what}"));
    let conn = req.extensions().get::<Arc<ConnInfo>>().cloned().ok_or_else(|| missing("connection"))?;
    let account = req.extensions().get::<Arc<crate::budget::Account>>().cloned().ok_or_else(|| missing("account"))?;
    let (caller, target) = (learned::<Caller>(&req)?, learned::<Target>(&req)?);
    // Taken, not shared: the route and the query are the handler's to consume (the layers above let
    // theirs go), and a watch then keeps none of it in the request's parts.
    let info = req.extensions_mut().remove::<Arc<RequestInfo>>().ok_or_else(|| missing("request info"))?;
    let RequestInfo { route, query, .. } = Arc::unwrap_or_clone(info);
    let exchange = super::edge::exchange(&req);
    let (resp, labels) =
        admitted(&state, &conn, &caller.0, target.cluster.clone(), route, query, req, &account, &exchange.cluster)
            .await?;
    let _ = exchange.labels.set(labels);
    Ok(resp)
}

type Routed = ApiResult<(Response<Body>, Labels)>;

fn plain(r: Response<Body>) -> Routed {
    Ok((r, Labels::default()))
}

/// A request the edge admitted: discovery, OpenAPI, metrics or a resource.
#[allow(clippy::too_many_arguments)]
async fn admitted(
    state: &Arc<AppState>,
    conn: &ConnInfo,
    who: &Identity,
    target: ClusterTarget,
    route: Route,
    q: Query,
    req: Request<Incoming>,
    account: &Arc<crate::budget::Account>,
    counted_in: &OnceLock<String>,
) -> Routed {
    let sh = match &target {
        ClusterTarget::Named(name) => {
            let Some(placed) = state.directory.locate(name).await? else {
                return Err(ApiError::not_found("logicalclusters", resources::TENANCY_GROUP, name));
            };
            // Only clusters that exist get figures: no caller can make up names to fill the table with.
            let _ = counted_in.set(name.clone());
            state.at(placed, name).await?
        }
        // Judged by root's RBAC; a list or watch reads every shard (see `fanout`).
        ClusterTarget::Wildcard => state.root(),
    };
    // The wildcard's discovery is the built-ins' (see `CrdIndex::docs`).
    let cluster_name = target.name().unwrap_or("*").to_string();
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let if_none_match = req.headers().get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()).map(str::to_string);
    // Only discovery routes look their cluster's documents up: resource requests, the hot path, never do.
    let disc = || state.discovery(sh, &cluster_name);
    let doc = |d: &crate::discovery::Doc, ct: &str| -> Response<Body> {
        if if_none_match.as_deref() == Some(d.etag.as_str()) {
            let mut r = respond::bytes(304, ct, Bytes::new());
            r.headers_mut().insert(header::ETAG, d.etag.parse().expect("hex etag"));
            return r;
        }
        let mut r = respond::bytes(200, ct, d.body.as_ref().clone());
        r.headers_mut().insert(header::ETAG, d.etag.parse().expect("hex etag"));
        r.headers_mut().insert(header::VARY, "Accept".parse().expect("static"));
        r
    };
    match route {
        // Answered by the edge before authentication; a route is never both.
        Route::Version | Route::Health(_) => Err(ApiError::path_not_found()),
        Route::Metrics => {
            // Root's are the whole server's, granted by root's RBAC only; another cluster's are its
            // own requests, granted by its RBAC (its admin's `nonResourceURLs: ["*"]` by default).
            let Some(cluster) = target.name() else { return Err(ApiError::path_not_found()) };
            if !sh.authz.authorize_path(who, cluster, "get", "/metrics").await? {
                return Err(ApiError::forbidden(format!(
                    "forbidden: User \"{}\" cannot get path \"/metrics\"",
                    who.user
                )));
            }
            let text = if cluster == ROOT {
                let mut all = state.metrics.render();
                all.extend_from_slice(state.usage.render_top().as_bytes());
                all
            } else {
                let (in_flight, watches) = state.inflight.cluster_counts(cluster);
                let footprint = &sh.registry.footprint;
                let mut text = state.usage.render_cluster(cluster, in_flight, watches);
                let holdings =
                    crate::usage::render_holdings(footprint.usage(cluster), &footprint.objects_by_resource(cluster));
                text.push_str(&holdings);
                text.into_bytes()
            };
            plain(respond::bytes(200, "text/plain; version=0.0.4", text))
        }
        Route::Api | Route::Apis => {
            let disc = disc();
            let core = matches!(route, Route::Api);
            if let Some(agg) = accept.as_deref().and_then(Aggregated::negotiate) {
                let d = &disc.aggregated[&(agg.version(), core)];
                let mut r = doc(d, &agg.content_type());
                r.headers_mut().insert(header::CACHE_CONTROL, "public".parse().expect("static"));
                return plain(r);
            }
            if core {
                let mut v = disc.api_versions.clone();
                v["serverAddressByClientCIDRs"] =
                    json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": conn.server_address}]);
                plain(respond::json(200, &v))
            } else {
                plain(doc(&disc.apis, "application/json"))
            }
        }
        Route::ApiVersion(v) => match disc().resource_lists.get(&format!("api/{v}")) {
            Some(d) => plain(doc(d, "application/json")),
            None => Err(ApiError::path_not_found()),
        },
        Route::ApiGroup(g) => match disc().groups.get(&g) {
            Some(d) => plain(doc(d, "application/json")),
            None => Err(ApiError::path_not_found()),
        },
        Route::ApiGroupVersion(g, v) => match disc().resource_lists.get(&format!("apis/{g}/{v}")) {
            Some(d) => plain(doc(d, "application/json")),
            None => Err(ApiError::path_not_found()),
        },
        Route::OpenApiV2 => {
            let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok());
            let (content_type, body) = crate::openapi::v2::document(accept, &format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0"));
            plain(respond::bytes(200, content_type, body))
        }
        Route::OpenApiV3 => plain(openapi_index(state, sh, &cluster_name, if_none_match.as_deref()).await?),
        Route::OpenApiV3Doc(gv) => {
            plain(openapi_doc(state, sh, &cluster_name, &gv, q.get("hash"), if_none_match.as_deref()).await?)
        }
        Route::Resource(rp) => resource(state, sh, who, &target, rp, q, req, account).await,
    }
}

/// The `/version` answer.
pub(super) fn version() -> Value {
    json!({
        "major": KUBE_MAJOR, "minor": KUBE_MINOR, "gitVersion": format!("v{KUBE_MAJOR}.{KUBE_MINOR}.0"),
        "gitCommit": env!("CARGO_PKG_VERSION"), "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24", "compiler": "gc", "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `api/v1` or `apis/<group>/<version>`, as the key of its group and version.
fn gv_key(path: &str) -> Option<(String, String)> {
    match path.split('/').collect::<Vec<_>>()[..] {
        ["api", v] => Some((String::new(), v.to_string())),
        ["apis", g, v] if !g.is_empty() => Some((g.to_string(), v.to_string())),
        _ => None,
    }
}

/// The OpenAPI v3 document of group/version path `gv` in `disc`, the cluster's discovery (looked up by
/// key: an index of every group/version asks once per group/version).
async fn openapi_bytes(
    state: &AppState,
    sh: &Serving,
    cluster: &str,
    disc: &Disc<'_>,
    gv: &str,
) -> ApiResult<Option<OpenApiDoc>> {
    let root = cluster == ROOT;
    let Some(((g, v), defs)) = gv_key(gv).and_then(|k| disc.by_gv.get_key_value(&k)) else {
        return Ok(None);
    };
    // Only documents of custom groups are the cluster's own; built-in ones are shared by every cluster
    // (CRDs may not use built-in groups), so a thousand clusters with CRDs do not hold a thousand copies.
    let own = match disc {
        Disc::Custom(docs) if defs.iter().any(|d| d.custom.is_some()) => Some(docs.clone()),
        _ => None,
    };
    let hit = match &own {
        Some(docs) => docs.openapi(gv),
        None => state.openapi.get(&(root, gv.to_string())).map(|h| h.clone()),
    };
    if hit.is_some() {
        return Ok(hit);
    }
    let mut ops: Vec<crate::openapi::ResourceOps> = defs
        .iter()
        .map(|d| crate::openapi::ResourceOps {
            plural: &d.plural,
            kind: &d.kind,
            namespaced: d.namespaced,
            status: d.status,
            scale: d.scale.is_some(),
            verbs: d.verbs,
        })
        .collect();
    // The subresources that are more than a view of status or scale (eviction, binding, token,
    // approval, finalize, ephemeralcontainers, resize, and the streaming ones kgate refuses), each
    // published as kube publishes it.
    let subs: Vec<(String, &str, bool, Vec<&str>)> = defs
        .iter()
        .flat_map(|d| {
            d.subresources.iter().filter(|s| s.name != "status" && s.name != "scale").map(|s| {
                (
                    format!("{}/{}", d.plural, s.name),
                    s.kind.as_str(),
                    d.namespaced,
                    s.verbs.iter().map(String::as_str).collect(),
                )
            })
        })
        .collect();
    ops.extend(subs.iter().map(|(plural, kind, namespaced, verbs)| crate::openapi::ResourceOps {
        plural,
        kind,
        namespaced: *namespaced,
        status: false,
        scale: false,
        verbs,
    }));
    let mut schemas = Vec::new();
    for d in defs.iter().filter(|d| d.custom.is_some()) {
        // A CRD whose schema is gone (deleted meanwhile) is published with an open object schema.
        let s = sh.crds.schema(cluster, d).await?;
        schemas.push((d.kind.clone(), s.unwrap_or_else(|| Arc::new(json!({"type": "object"})))));
    }
    let custom: Vec<crate::openapi::CustomKind> =
        schemas.iter().map(|(kind, schema)| crate::openapi::CustomKind { kind, schema }).collect();
    let doc = crate::openapi::Builtins::get().gv_document_with(g, v, &ops, &custom).map_err(ApiError::internal)?;
    let bytes = serde_json::to_vec(&doc).expect("JSON serialises");
    let hash = crate::openapi::doc_hash(&bytes);
    let entry = (Arc::new(bytes), hash);
    match &own {
        Some(docs) => {
            if docs.keep_openapi(gv, entry.clone()) {
                sh.crds.docs_grew(cluster, docs);
            }
        }
        None => {
            state.openapi.insert((root, gv.to_string()), entry.clone());
        }
    }
    Ok(Some(entry))
}

async fn openapi_index(
    state: &AppState,
    sh: &Serving,
    cluster: &str,
    if_none_match: Option<&str>,
) -> ApiResult<Response<Body>> {
    // One discovery for the whole index: each lookup of it would walk the cluster's CRDs again.
    let disc = state.discovery(sh, cluster);
    let gvs: Vec<String> = disc.by_gv.keys().map(|(g, v)| gv_path(g, v)).collect();
    let mut paths = serde_json::Map::new();
    for gv in gvs {
        // A cluster of thousands of groups: the worker is given back now and then.
        tokio::task::coop::consume_budget().await;
        if let Some((_, hash)) = openapi_bytes(state, sh, cluster, &disc, &gv).await? {
            paths.insert(gv.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{gv}?hash={hash}")}));
        }
    }
    let body = serde_json::to_vec(&json!({"paths": paths})).expect("JSON serialises");
    let etag = format!("\"{}\"", crate::openapi::doc_hash(&body));
    if if_none_match == Some(etag.as_str()) {
        return Ok(respond::bytes(304, "application/json", Bytes::new()));
    }
    let mut r = respond::bytes(200, "application/json", body);
    r.headers_mut().insert(header::ETAG, etag.parse().expect("hex"));
    Ok(r)
}

async fn openapi_doc(
    state: &AppState,
    sh: &Serving,
    cluster: &str,
    gv: &str,
    hash: Option<&str>,
    if_none_match: Option<&str>,
) -> ApiResult<Response<Body>> {
    let disc = state.discovery(sh, cluster);
    let (bytes, current) = openapi_bytes(state, sh, cluster, &disc, gv).await?.ok_or_else(ApiError::path_not_found)?;
    let etag = format!("\"{current}\"");
    if let Some(h) = hash {
        if h != current {
            let mut r = respond::bytes(301, "text/plain", Bytes::new());
            let prefix = if cluster == ROOT { String::new() } else { format!("/clusters/{cluster}") };
            r.headers_mut().insert(
                header::LOCATION,
                format!("{prefix}/openapi/v3/{gv}?hash={current}").parse().map_err(ApiError::internal)?,
            );
            return Ok(r);
        }
    }
    if if_none_match == Some(etag.as_str()) {
        return Ok(respond::bytes(304, "application/json", Bytes::new()));
    }
    let mut r = respond::bytes(200, "application/json", bytes.as_ref().clone());
    let h = r.headers_mut();
    h.insert(header::ETAG, etag.parse().map_err(ApiError::internal)?);
    h.insert(header::VARY, "Accept".parse().expect("static"));
    if hash.is_some() {
        h.insert(header::CACHE_CONTROL, "public, immutable".parse().expect("static"));
        let expires =
            (chrono::Utc::now() + chrono::Duration::days(365)).format("%a, %d %b %Y %H:%M:%S GMT").to_string();
        h.insert(header::EXPIRES, expires.parse().map_err(ApiError::internal)?);
    } else {
        h.insert(header::CACHE_CONTROL, "no-cache, private".parse().expect("static"));
    }
    Ok(r)
}

/// Patch content types, strategic merge last (built-ins only).
const PATCH_TYPES: [&str; 4] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
];

/// The Kubernetes verb of a resource request.
pub(super) fn verb_of(method: &Method, rp: &ResourcePath, watch: bool) -> ApiResult<&'static str> {
    Ok(match (method.as_str(), rp.name.is_some()) {
        ("GET" | "HEAD", true) if watch => "watch",
        ("GET" | "HEAD", true) => "get",
        ("GET" | "HEAD", false) if watch => "watch",
        ("GET" | "HEAD", false) => "list",
        ("POST", _) => "create",
        ("PUT", true) => "update",
        ("PATCH", true) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (m, _) => return Err(ApiError::method_not_allowed(m, &rp.resource)),
    })
}

#[allow(clippy::too_many_arguments)]
async fn resource(
    state: &Arc<AppState>,
    sh: &Serving,
    who: &Identity,
    target: &ClusterTarget,
    rp: ResourcePath,
    q: Query,
    req: Request<Incoming>,
    account: &Arc<crate::budget::Account>,
) -> Routed {
    let cluster_for_defs = target.name().unwrap_or("*");
    let builtin = resources::for_cluster(cluster_for_defs)
        .find(|d| d.group == rp.group && d.version == rp.version && d.plural == rp.resource)
        .cloned();
    // Custom resources only where no built-in matches (CRDs may not use built-in groups).
    let mut cluster_filter = None;
    let def: Arc<ResourceDef> = match (builtin, target) {
        (Some(d), _) => d,
        (None, ClusterTarget::Named(c)) => {
            sh.crds.find(c, &rp.group, &rp.version, &rp.resource).ok_or_else(ApiError::path_not_found)?
        }
        (None, ClusterTarget::Wildcard) => {
            // As the first shard whose clusters serve it defines it.
            let (d, filter) = state
                .shards
                .iter()
                .find_map(|s| s.crds.wildcard(&rp.group, &rp.version, &rp.resource))
                .ok_or_else(ApiError::path_not_found)?;
            cluster_filter = Some(filter);
            d
        }
    };
    if rp.namespace.is_some() && !def.namespaced {
        return Err(ApiError::path_not_found());
    }
    let watch = rp.watch_path || q.flag("watch")?;
    let verb = verb_of(req.method(), &rp, watch)?;
    let labels = Labels { verb: verb.to_string(), resource: def.metric_label().to_string() };
    let attrs = auth::Attributes {
        verb,
        group: &def.group,
        resource: &def.plural,
        subresource: rp.subresource.as_deref(),
        namespace: rp.namespace.as_deref(),
        name: rp.name.as_deref(),
    };
    // Wildcard requests are judged by root's RBAC.
    let authz_cluster = target.name().unwrap_or(ROOT);
    sh.authz.authorize(who, authz_cluster, &attrs).await?.map_err(ApiError::forbidden)?;
    let cluster = match target {
        ClusterTarget::Wildcard => {
            if verb != "list" && verb != "watch" {
                return Err(ApiError::method_not_allowed(verb, &def.plural));
            }
            None
        }
        ClusterTarget::Named(n) => Some(n.clone()),
    };
    if !def.allows(verb) && rp.subresource.is_none() {
        return Err(ApiError::method_not_allowed(verb, &def.plural));
    }
    let def = match (&def.custom, &cluster, verb) {
        (Some(custom), Some(c), "create" | "update" | "patch") => {
            // No schema: the CRD or this version went from the store and this replica's index has not
            // caught up. kube would not serve the resource; writing it unchecked is not an option.
            let schema = sh.crds.schema(c, &def).await?.ok_or_else(ApiError::path_not_found)?;
            let custom = crate::resources::CustomInfo { schema: Some(schema), ..(**custom).clone() };
            Arc::new(ResourceDef { custom: Some(Arc::new(custom)), ..(*def).clone() })
        }
        _ => def,
    };
    let user_agent = req.headers().get(header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let content_type = req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
    let cluster_str = cluster.clone().unwrap_or_default();
    let shape = respond::shape(accept.as_deref());
    let include = respond::include_object(&q);
    let reg = &sh.registry;
    let sharded = state.shards.len() > 1;
    let method = req.method().clone();
    let audit = req.extensions().get::<Arc<crate::audit::Record>>().cloned();
    let body = body::read(req.into_body()).await?;
    if let Some(record) = &audit {
        record.request_body(&body);
    }
    // Decoding a body into a tree takes many times its size (a small JSON object costs some hundreds of
    // bytes as a tree): charged while the request is handled, so a tenant's concurrent large writes
    // are bounded by its budget too. A bodiless read has nothing to decode and was checked at the door.
    let _decoding = if body.is_empty() { None } else { Some(account.try_charge(body.len() as u64 * DECODE_FACTOR)?) };
    let mut ctx = Ctx {
        cluster: &cluster_str,
        def: &def,
        namespace: rp.namespace.as_deref(),
        user: who,
        user_agent: user_agent.as_deref(),
        admit: None,
    };
    let escalation = match verb {
        "create" | "update" | "patch" if crate::authz::guards(&def.group, &def.plural) && def.custom.is_none() => {
            let role_ref = if def.plural.ends_with("bindings") {
                binding_role_ref(reg, &ctx, verb, rp.name.as_deref(), content_type.as_deref(), &body).await?
            } else {
                None
            };
            let namespace = rp.namespace.as_deref();
            Some(sh.authz.escalation(who, &cluster_str, &def.plural, namespace, rp.name.as_deref(), role_ref).await?)
        }
        _ => None,
    };
    let signer = match verb {
        "update" | "patch" if def.group == "certificates.k8s.io" && def.plural == "certificatesigningrequests" => {
            sh.authz.signer_check(who, &cluster_str, rp.subresource.as_deref()).await?
        }
        _ => None,
    };
    let owners = match verb {
        "create" | "update" | "patch" if !def.is_virtual() && !who.is_master() => {
            let (crds, cluster) = (sh.crds.clone(), cluster_str.clone());
            let resolve = Box::new(move |group: &str, version: &str, kind: &str| {
                resources::for_cluster(&cluster)
                    .find(|d| d.group == group && d.version == version && d.kind == kind)
                    .map(|d| (d.plural.clone(), d.namespaced))
                    .or_else(|| {
                        crds.find_kind(&cluster, group, version, kind).map(|d| (d.plural.clone(), d.namespaced))
                    })
            });
            let (ns, name, sub) = (rp.namespace.as_deref(), rp.name.as_deref(), rp.subresource.as_deref());
            Some(sh.authz.owner_ref_check(who, &cluster_str, &def.group, &def.plural, sub, ns, name, resolve).await?)
        }
        _ => None,
    };
    let admits = crate::registry::Admits(
        [
            escalation.as_ref().map(|e| e as &dyn crate::registry::Admit),
            signer.as_ref().map(|s| s as &dyn crate::registry::Admit),
            owners.as_ref().map(|o| o as &dyn crate::registry::Admit),
        ]
        .into_iter()
        .flatten()
        .collect(),
    );
    ctx.admit = (!admits.0.is_empty()).then_some(&admits as &dyn crate::registry::Admit);

    if def.is_virtual() {
        // Reviews and bindings are created at their collection's URL and nothing else: authorization
        // above checked the verb the URL asked for, so any other shape must not act.
        if rp.name.is_some() || rp.subresource.is_some() {
            return Err(ApiError::path_not_found());
        }
        if verb != "create" {
            return Err(ApiError::method_not_allowed(verb, &def.plural));
        }
    }
    if def.group.is_empty() && def.plural == "bindings" {
        let ct = content_type.as_deref();
        return Ok((super::actions::create_binding(reg, &ctx, &q, ct, &body).await?, labels));
    }
    if def.is_virtual() {
        let ns = rp.namespace.as_deref();
        let work = review(state, sh, &def, who, authz_cluster, ns, content_type.as_deref(), &body);
        return Ok((heavy_if(state, authz_cluster, body.len(), work).await?, labels));
    }
    if def.group.is_empty() && def.plural == "componentstatuses" && rp.subresource.is_none() {
        let answer = super::components::serve(&*reg.store, &def, verb, rp.name.as_deref(), shape, include).await?;
        return Ok((answer, labels));
    }
    let name = rp.name.as_deref();
    let sub = rp.subresource.as_deref();
    // A request that deletes an account, or what a token may be bound to (a delete, an eviction), ends
    // what is remembered of its cluster's token checks when it ends, however it ends: a token of what
    // it deleted fails from the next request on here. So does an update that answers an object being
    // deleted (it may have taken off its last finalizer, deleting it). Not every update: pods' status
    // is written all day, and each end also ends what is remembered for the clusters sharing the
    // slot. The store watch covers other replicas and deletions made elsewhere (a namespace's cleanup).
    let subject = def.group.is_empty() && super::token_checks::SUBJECTS.contains(&def.plural.as_str());
    let may_delete_subject = subject && (matches!(verb, "delete" | "deletecollection") || sub == Some("eviction"));
    let _ends_checks = may_delete_subject.then(|| state.token_checks.ended_on_drop(&cluster_str));
    let ends_if_deleting = |w: &crate::registry::Written| {
        if subject && w.body["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
            state.token_checks.invalidate(&cluster_str);
        }
    };
    match sub {
        None | Some("status") | Some("scale") => {}
        // Views of some of the object's fields: read and written like the object itself.
        Some(s) if crate::registry::FIELD_SUBRESOURCES.contains(&s) && def.subresources.iter().any(|x| x.name == s) => {
            let served = def.subresources.iter().any(|x| x.name == s && x.verbs.iter().any(|v| v == verb));
            if !served {
                return Err(ApiError::method_not_allowed(verb, &format!("{}/{s}", def.plural)));
            }
        }
        Some(s) if def.subresources.iter().any(|x| x.name == s) && s != "token" => {
            let ct = content_type.as_deref();
            return Ok((super::actions::serve(reg, &ctx, verb, name, s, &q, (ct, &body)).await?, labels));
        }
        Some("token") if def.group.is_empty() && def.plural == "serviceaccounts" => {
            return match (verb, name) {
                ("create", Some(n)) => {
                    let req = body::decode_object(content_type.as_deref(), &body)?.value;
                    let (answer, warnings) = super::tokens::request(state, &ctx, n, &req).await?;
                    let mut r = respond::json(201, &answer);
                    respond::add_warnings(&mut r, &warnings);
                    Ok((r, labels))
                }
                _ => Err(ApiError::method_not_allowed(verb, "serviceaccounts/token")),
            };
        }
        Some(_) => return Err(ApiError::path_not_found()),
    }
    if sub == Some("status") && !def.status || sub == Some("scale") && def.scale.is_none() {
        return Err(ApiError::path_not_found());
    }
    // The revision of the last object written, for read-your-writes on CRDs.
    let mut last_rev: Option<i64> = None;
    /// A write's answer, in the shape the client asked for (`as=PartialObjectMetadata`, `as=Table`) when
    /// it is the object, as kube negotiates every verb's answer; a Status stays a Status.
    type View<'a> = (&'a ResourceDef, respond::Shape, crate::table::IncludeObject, Option<&'a crate::audit::Record>);
    fn written(w: crate::registry::Written, last_rev: &mut Option<i64>, view: View<'_>) -> Response<Body> {
        let (def, shape, include, audit) = view;
        if let Some(record) = audit {
            record.written(&w.body);
        }
        *last_rev = crate::meta::meta_str(&w.body, "resourceVersion").and_then(|r| r.parse().ok());
        let mut r = if w.body["kind"] == def.kind.as_str() && !matches!(shape, respond::Shape::Plain) {
            respond::json(w.code, &respond::render_object(def, &w.body, shape, include, true))
        } else {
            respond::json(w.code, &w.body)
        };
        respond::add_warnings(&mut r, &w.warnings);
        r
    }
    let view = (&*def, shape, include, audit.as_deref());
    let resp = match (verb, name, sub) {
        ("get", Some(n), Some("scale")) => {
            respond::json(200, &crate::registry::scale_of(&def, &reg.get(&ctx, n).await?)?)
        }
        ("get", Some(n), None) if q.get("resourceVersion") == Some("0") => {
            // Any recent state will do: the watch cache answers without a store read.
            let stored = crate::registry::stored_def(&def);
            let Some(json) = crate::watch::read::get_any(&sh.cache, &stored, &reg.key(&ctx, n)).await? else {
                return Err(ApiError::not_found(&def.plural, &def.group, n));
            };
            match shape {
                respond::Shape::Plain if !crate::registry::converts(&def) => {
                    respond::bytes(200, "application/json", [&json[..], b"\n"].concat())
                }
                _ => {
                    let mut obj: Value = serde_json::from_slice(&json).map_err(ApiError::internal)?;
                    crate::registry::from_storage(&def, &mut obj);
                    respond::json(200, &respond::render_object(&def, &obj, shape, include, true))
                }
            }
        }
        ("get", Some(n), _) => {
            let obj = reg.get(&ctx, n).await?;
            respond::json(200, &respond::render_object(&def, &obj, shape, include, true))
        }
        ("list", None, None) if cluster.is_none() && state.shards.len() > 1 => {
            let (q, asked) = super::fanout::across(&q, &state.root().registry.shards)?;
            let opts = ListOptions::from_query(&q, false)?;
            let filters = shard_filters(state, &def, cluster_filter.is_some());
            let ns = rp.namespace.as_deref();
            let view = (shape, include);
            return Ok((super::fanout::list(state, &def, ns, opts, asked, filters, view, account).await?, labels));
        }
        ("watch", _, None) if cluster.is_none() && state.shards.len() > 1 => {
            let (q, asked) = super::fanout::across(&q, &state.root().registry.shards)?;
            let mut opts = ListOptions::from_query(&q, rp.watch_path)?;
            if let Some(n) = name {
                opts.fields = crate::selector::FieldSelector::parse(&format!("metadata.name={n}"))?;
            }
            let filters = shard_filters(state, &def, cluster_filter.is_some());
            let w = super::fanout::WatchAcross {
                def: def.clone(),
                namespace: rp.namespace.clone(),
                opts,
                render: watch_render(&def, shape, include),
                account: account.clone(),
            };
            let (body, warnings) = super::fanout::watch(state, w, asked, filters).await?;
            let mut r = watch_response(state, body);
            respond::add_warnings(&mut r, &warnings);
            return Ok((r, labels));
        }
        ("list", None, None) => {
            let opts = ListOptions { clusters: cluster_filter, ..ListOptions::from_query(&q, false)? };
            let ns = rp.namespace.as_deref();
            crate::registry::check_fields(&def, &opts)?;
            // The cache holds objects as stored; a version stored as another converts each.
            let stored = crate::registry::stored_def(&def);
            let cached =
                crate::watch::read::list(&sh.cache, reg, &stored, cluster.as_deref(), ns, &opts, Some(account));
            if let Some(l) = cached.await? {
                let mut meta = json!({"resourceVersion": l.revision.to_string()});
                if let Some(c) = l.continue_token {
                    meta["continue"] = json!(c);
                }
                return Ok((
                    match shape {
                        respond::Shape::Plain if !crate::registry::converts(&def) => {
                            let mut items = l.items;
                            respond::raw_list(&def, &meta, move |take| items.fill(take))
                        }
                        _ => {
                            let mut items = l.items.values()?;
                            items.iter_mut().for_each(|o| crate::registry::from_storage(&def, o));
                            respond::json(200, &respond::render_list(&def, items, meta, shape, include))
                        }
                    },
                    labels,
                ));
            }
            // Held whole until rendered and sent: charged as it is read, refused past the budget.
            let mut held = Vec::new();
            let mut charge = |bytes: usize| -> ApiResult<()> { Ok(account.charge_read(&mut held, bytes)?) };
            let list = reg.list_charged(&def, cluster.as_deref(), ns, &opts, &mut charge).await?;
            let mut meta = json!({"resourceVersion": list.revision.to_string()});
            if let Some(c) = list.continue_token {
                meta["continue"] = json!(c);
            }
            respond::json(200, &respond::render_list(&def, list.items, meta, shape, include))
        }
        ("watch", _, None) => {
            let mut opts = ListOptions { clusters: cluster_filter, ..ListOptions::from_query(&q, rp.watch_path)? };
            if let Some(n) = name {
                // `/watch/.../<name>`: a watch of one object.
                opts.fields = crate::selector::FieldSelector::parse(&format!("metadata.name={n}"))?;
            }
            let render = watch_render(&def, shape, include);
            let rx = crate::watch::start(
                &sh.cache,
                reg.clone(),
                crate::watch::WatchRequest {
                    account: Some(account.clone()),
                    def: def.clone(),
                    cluster: cluster.clone(),
                    namespace: rp.namespace.clone(),
                    opts,
                    render,
                },
                state.shutdown.clone(),
            )
            .await?;
            watch_response(state, rx)
        }
        ("create", None, None) => {
            let opts = WriteOptions::from_query(&q)?;
            let work = async {
                let (obj, warned) = decoded(&def, &opts, content_type.as_deref(), &body)?;
                Ok::<_, ApiError>(warn(reg.create(&ctx, obj, &opts).await?, warned))
            };
            written(heavy_if(state, &cluster_str, body.len(), work).await?, &mut last_rev, view)
        }
        ("update", Some(n), Some("scale")) => {
            let opts = WriteOptions::from_query(&q)?;
            let work = async {
                let (obj, warned) = decoded(&def, &opts, content_type.as_deref(), &body)?;
                Ok::<_, ApiError>(warn(reg.update_scale(&ctx, n, obj, &opts).await?, warned))
            };
            written(heavy_if(state, &cluster_str, body.len(), work).await?, &mut last_rev, view)
        }
        ("update", Some(n), _) => {
            let opts = WriteOptions::from_query(&q)?;
            let work = async {
                let (mut obj, warned) = decoded(&def, &opts, content_type.as_deref(), &body)?;
                if sharded {
                    own_revision(&mut obj, &sh.registry.shard);
                }
                Ok::<_, ApiError>(warn(reg.update(&ctx, n, obj, &opts, sub).await?, warned))
            };
            let w = heavy_if(state, &cluster_str, body.len(), work).await?;
            ends_if_deleting(&w);
            written(w, &mut last_rev, view)
        }
        ("patch", Some(n), _) => {
            let ct = content_type.as_deref().unwrap_or("");
            // As kube-apiserver: custom resources have no strategic merge rules.
            let accepted: &[&str] = match def.custom {
                Some(_) => &PATCH_TYPES[..3],
                None => &PATCH_TYPES,
            };
            let pt = PatchType::from_content_type(ct)
                .filter(|pt| def.custom.is_none() || *pt != PatchType::StrategicMerge)
                .ok_or_else(|| ApiError::unsupported_media_type(ct, accepted))?;
            let opts = WriteOptions::from_query(&q)?;
            // Only a server with shards hands out composites: a patch elsewhere is not read twice.
            let body = if sharded { own_patch_revision(pt, body, &sh.registry.shard) } else { body };
            // A small patch of a large object costs what the object does: weighed by both, the object
            // as the watch cache holds it when it does (no store read to decide).
            let held = sh.cache.existing(&crate::registry::stored_def(&def)).and_then(|c| c.size_of(&reg.key(&ctx, n)));
            let weight = body.len().max(held.unwrap_or(0));
            let w = heavy_if(state, &cluster_str, weight, reg.patch(&ctx, n, pt, &body, &opts, sub)).await?;
            ends_if_deleting(&w);
            written(w, &mut last_rev, view)
        }
        ("delete", Some(n), None) => {
            let mut dopts = delete_options(content_type.as_deref(), &body, &q)?;
            if let Some(rv) = &mut dopts.resource_version {
                *rv = crate::shard::own(rv, &sh.registry.shard).to_string();
            }
            let w = reg.delete(&ctx, n, &dopts).await?;
            if def.group == resources::TENANCY_GROUP && !dopts.dry_run {
                // Read-your-writes on this replica: the deleted cluster answers 404 from now on. A
                // delete that answered is marked or gone, so no read is needed to know it.
                state.directory.forget(n);
            }
            written(w, &mut last_rev, view)
        }
        ("deletecollection", None, None) if def.namespaced && rp.namespace.is_none() => {
            // As kube-apiserver: deletecollection of a namespaced resource needs a namespace.
            return Err(ApiError::method_not_allowed("deletecollection", &def.plural));
        }
        ("deletecollection", None, None) => {
            let dopts = delete_options(content_type.as_deref(), &body, &q)?;
            let lopts = ListOptions::from_query(&q, false)?;
            // Held whole (the objects, then the answer listing them): charged as read, as a list is.
            let mut held = Vec::new();
            let mut charge = |bytes: usize| -> ApiResult<()> { Ok(account.charge_read(&mut held, bytes)?) };
            let w = reg.delete_collection(&ctx, &lopts, &dopts, &mut charge).await?;
            if def.group == resources::TENANCY_GROUP {
                for item in w.body["items"].as_array().into_iter().flatten() {
                    state.directory.refresh(crate::meta::meta_str(item, "name").unwrap_or_default()).await;
                }
            }
            written(w, &mut last_rev, view)
        }
        _ => return Err(ApiError::method_not_allowed(method.as_str(), &def.plural)),
    };
    if def.group == "apiextensions.k8s.io" && !matches!(verb, "get" | "list" | "watch") {
        // Read-your-writes for APIs on this replica: the next request finds the CRD's resources.
        if let Some(rev) = last_rev {
            sh.crds.wait_for(rev).await;
        }
    }
    if def.group == "rbac.authorization.k8s.io" && !matches!(verb, "get" | "list" | "watch") {
        // Read-your-writes for RBAC on this replica; the invalidation watch covers the others.
        sh.authz.invalidate(&cluster_str);
    }
    Ok((resp, labels))
}

/// An object's resourceVersion as this shard's revision, when it carries the composite a wildcard
/// watch across shards gave it (see `shard::own`).
fn own_revision(obj: &mut Value, shard: &str) {
    if let Some(rv) = obj["metadata"]["resourceVersion"].as_str().filter(|rv| rv.contains(':')) {
        let own = crate::shard::own(rv, shard).to_string();
        obj["metadata"]["resourceVersion"] = json!(own);
    }
}

/// A JSON or merge patch's resourceVersion (an optimistic lock) as this shard's revision, when it
/// names the composite a wildcard watch across shards gave (see `own_revision`). Other bodies, and
/// bodies that name none, go as they are.
fn own_patch_revision(pt: PatchType, body: Bytes, shard: &str) -> Bytes {
    if pt == PatchType::Apply || !body.windows(17).any(|w| w == b"\"resourceVersion\"") {
        return body;
    }
    let Ok(mut patch) = serde_json::from_slice::<Value>(&body) else { return body };
    let composite = |v: &Value| v.as_str().is_some_and(|rv| rv.contains(':'));
    let in_object = patch.is_object() && composite(&patch["metadata"]["resourceVersion"]);
    let rewritten = match &mut patch {
        Value::Object(_) if in_object => {
            own_revision(&mut patch, shard);
            true
        }
        Value::Array(ops) => {
            let mut any = false;
            for op in ops.iter_mut().filter(|op| op["path"] == "/metadata/resourceVersion" && composite(&op["value"])) {
                let own = crate::shard::own(op["value"].as_str().unwrap_or_default(), shard).to_string();
                op["value"] = json!(own);
                any = true;
            }
            any
        }
        _ => false,
    };
    if !rewritten {
        return body;
    }
    Bytes::from(serde_json::to_vec(&patch).expect("JSON serialises"))
}

/// How a watch renders each object: as stored for plain JSON, else as the client asked.
fn watch_render(
    def: &Arc<ResourceDef>,
    shape: respond::Shape,
    include: crate::table::IncludeObject,
) -> Option<crate::watch::Render> {
    let def = def.clone();
    match shape {
        respond::Shape::Plain => None,
        _ => Some(Arc::new(move |obj: &Value, first: bool| respond::render_object(&def, obj, shape, include, first))),
    }
}

/// A watch's response: its body, counted open for as long as it lives.
fn watch_response(state: &AppState, body: crate::watch::WatchBody) -> Response<Body> {
    let open = OpenWatch::new(&state.metrics.inflight.watches);
    let stream = body.map(move |b| {
        let _open = &open;
        Ok::<_, std::convert::Infallible>(Frame::data(b))
    });
    let mut r = Response::new(BodyExt::boxed_unsync(StreamBody::new(stream)));
    r.headers_mut().insert(header::CONTENT_TYPE, "application/json".parse().expect("static"));
    r.headers_mut().insert(header::CACHE_CONTROL, "no-cache, private".parse().expect("static"));
    r
}

/// Each shard's filter of the clusters whose CRD serves a custom resource as `def` (none for a
/// built-in, which every cluster serves).
fn shard_filters(
    state: &AppState,
    def: &Arc<ResourceDef>,
    custom: bool,
) -> Vec<Option<crate::registry::ClusterFilter>> {
    state.shards.iter().map(|s| custom.then(|| s.crds.filter_like(def))).collect()
}

/// A watch open, counted in `apiserver_longrunning_requests` until dropped with its stream.
struct OpenWatch(prometheus::IntGauge);

impl OpenWatch {
    fn new(gauge: &prometheus::IntGauge) -> OpenWatch {
        gauge.inc();
        OpenWatch(gauge.clone())
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The role a write to a binding references, for its escalation check: the stored binding's (roleRef
/// cannot change) when a patch has one to go by, else the one the body names.
async fn binding_role_ref(
    reg: &crate::registry::Registry,
    ctx: &Ctx<'_>,
    verb: &str,
    name: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> ApiResult<Option<(String, String, String)>> {
    let apply = content_type.is_some_and(|c| c.starts_with("application/apply-patch"));
    let stored = match name {
        Some(n) if verb == "patch" => match reg.get(ctx, n).await {
            Ok(b) => Some(b),
            // Apply may create the binding; any other patch needs it.
            Err(e) if e.code == 404 && apply => None,
            Err(e) => return Err(e),
        },
        _ => None,
    };
    let sent = || body::decode_object(content_type, body).ok().map(|d| d.value);
    Ok(stored.or_else(sent).and_then(|b| crate::authz::role_ref(&b)))
}

/// How many times its size a request body may take once decoded, for its charge (`budget`): JSON of
/// small objects, the worst case, takes about thirty.
const DECODE_FACTOR: u64 = 32;

/// `work`, off the async workers when its body (or the object it changes) is large enough to cost a
/// while to decode and check.
async fn heavy_if<T>(state: &AppState, cluster: &str, weight: usize, work: impl std::future::Future<Output = T>) -> T {
    if weight >= super::heavy::HEAVY_BODY {
        state.metrics.heavy.inc();
        state.heavy.run(cluster, work).await
    } else {
        work.await
    }
}

/// An object body decoded, with the warnings its duplicate fields earn under the request's
/// `fieldValidation` (or its 400).
fn decoded(
    def: &ResourceDef,
    opts: &WriteOptions,
    content_type: Option<&str>,
    body: &[u8],
) -> ApiResult<(Value, Vec<String>)> {
    let d = body::decode_object(content_type, body)?;
    let warnings = opts.field_validation.duplicates(def, &d.duplicates)?;
    Ok((d.value, warnings))
}

/// A write's answer with `warnings` first.
fn warn(mut w: crate::registry::Written, mut warnings: Vec<String>) -> crate::registry::Written {
    warnings.append(&mut w.warnings);
    w.warnings = warnings;
    w
}

/// DeleteOptions from a DELETE's body, decoded by its Content-Type as every other body is (Helm sends
/// protobuf), or from the query alone when there is none.
fn delete_options(content_type: Option<&str>, body: &[u8], q: &Query) -> ApiResult<DeleteOptions> {
    let v = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        let decoded = body::decode_object(content_type, body).map_err(|e| match e.code {
            415 => e,
            _ => ApiError::bad_request(format!("error decoding DeleteOptions: {}", e.message)),
        })?;
        Some(decoded.value)
    };
    DeleteOptions::parse(v.as_ref(), q)
}

/// SelfSubjectAccessReview, SelfSubjectRulesReview and SelfSubjectReview: answered, never stored.
#[allow(clippy::too_many_arguments)]
async fn review(
    state: &AppState,
    sh: &Serving,
    def: &ResourceDef,
    who: &Identity,
    cluster: &str,
    namespace: Option<&str>,
    content_type: Option<&str>,
    body: &[u8],
) -> ApiResult<Response<Body>> {
    let mut obj = body::decode_object(content_type, body)?.value;
    obj["apiVersion"] = json!(def.api_version());
    obj["kind"] = json!(def.kind);
    match def.kind.as_str() {
        "SelfSubjectAccessReview" => {
            let allowed = access(sh, who, cluster, &obj["spec"]).await?;
            obj["status"] = json!({"allowed": allowed});
        }
        "SubjectAccessReview" | "LocalSubjectAccessReview" => {
            let spec = &obj["spec"];
            let strs = |v: &Value| -> Vec<String> {
                v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect()
            };
            let invalid = |reason: &str, field: &str, message: String| {
                ApiError::invalid(&def.kind, &def.group, "", vec![crate::status::cause(reason, field, message)])
            };
            let user = spec["user"].as_str().unwrap_or_default().to_string();
            let groups = strs(&spec["groups"]);
            if user.is_empty() && groups.is_empty() {
                let why = "Required value: at least one of user or group must be specified";
                return Err(invalid("FieldValueRequired", "spec.user", why.into()));
            }
            let attrs = &spec["resourceAttributes"];
            if namespace.is_some() && spec.get("nonResourceAttributes").is_some_and(|v| !v.is_null()) {
                let why = "Invalid value: \"\": disallowed on this kind of request".to_string();
                return Err(invalid("FieldValueInvalid", "spec.nonResourceAttributes", why));
            }
            if let Some(ns) = namespace {
                // As kube: a local review asks about its own namespace only.
                if attrs["namespace"].as_str().is_some_and(|n| !n.is_empty() && n != ns) {
                    let why = format!("Invalid value: {}: must match metadata.namespace", attrs["namespace"]);
                    return Err(invalid("FieldValueInvalid", "spec.resourceAttributes.namespace", why));
                }
                if attrs.is_object() {
                    obj["spec"]["resourceAttributes"]["namespace"] = json!(ns);
                }
            }
            // The subject is taken as named: no group is added, as kube's review does not add one.
            let subject = Identity { user, groups };
            let allowed = access(sh, &subject, cluster, &obj["spec"]).await?;
            obj["status"] = json!({"allowed": allowed});
            let ns = namespace.map(|n| json!({"namespace": n, "creationTimestamp": null}));
            obj["metadata"] = ns.unwrap_or(json!({"creationTimestamp": null}));
            return Ok(respond::json(201, &obj));
        }
        "SelfSubjectRulesReview" => {
            let ns = obj["spec"]["namespace"].as_str().unwrap_or("default").to_string();
            let (resource_rules, non_resource_rules) = sh.authz.rules_for(who, cluster, &ns).await?;
            obj["status"] =
                json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
        }
        "SelfSubjectReview" => {
            obj["status"] = json!({"userInfo": who.user_info()});
        }
        "TokenReview" => return Ok(respond::json(201, &super::tokens::review(state, cluster, obj).await?)),
        _ => return Err(ApiError::path_not_found()),
    }
    obj["metadata"] = json!({"creationTimestamp": null});
    Ok(respond::json(201, &obj))
}

/// Whether `who` may do what an access review's spec asks about, by the cluster's RBAC.
async fn access(sh: &Serving, who: &Identity, cluster: &str, spec: &Value) -> ApiResult<bool> {
    Ok(match (spec.get("resourceAttributes"), spec.get("nonResourceAttributes")) {
        (Some(ra), _) => {
            let s = |k: &str| ra.get(k).and_then(Value::as_str).filter(|x| !x.is_empty());
            let attrs = auth::Attributes {
                verb: s("verb").unwrap_or("get"),
                group: s("group").unwrap_or(""),
                resource: s("resource").unwrap_or(""),
                subresource: s("subresource"),
                namespace: s("namespace"),
                name: s("name"),
            };
            sh.authz.authorize(who, cluster, &attrs).await?.is_ok()
        }
        (None, Some(nra)) => {
            let verb = nra["verb"].as_str().unwrap_or("get");
            let path = nra["path"].as_str().unwrap_or("/");
            sh.authz.authorize_path(who, cluster, verb, path).await?
        }
        (None, None) => who.is_master(),
    })
}
