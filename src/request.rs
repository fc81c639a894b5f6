//! Request info: what a request path and query name (discovery, OpenAPI, or a resource verb), parsed
//! without IO, the way kube-apiserver's RequestInfoFactory reads them.

use std::collections::HashMap;

use crate::status::ApiError;

/// A resource request's target.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResourcePath {
    /// API group (`""` for `/api/v1`).
    pub group: String,
    /// Version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`, `scale`, `token`, ...).
    pub subresource: Option<String>,
    /// Came through the deprecated `/watch/` path segment.
    pub watch_path: bool,
}

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz` (the value is which).
    Health(&'static str),
    /// `/metrics`.
    Metrics,
    /// `/api`.
    Api,
    /// `/api/v1`.
    ApiVersion(String),
    /// `/apis`.
    Apis,
    /// `/apis/<group>`.
    ApiGroup(String),
    /// `/apis/<group>/<version>`.
    ApiGroupVersion(String, String),
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiV3,
    /// `/openapi/v3/<gv path>` (`api/v1`, `apis/apps/v1`).
    OpenApiV3Doc(String),
    /// A resource collection, object or subresource.
    Resource(ResourcePath),
}

/// Subresources of namespaces that are not a namespaced collection (`namespaces/x/status`).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

fn decode_segment(s: &str) -> Result<String, ApiError> {
    let d = percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map_err(|_| ApiError::bad_request("the request path is not valid UTF-8"))?;
    if d == "." || d == ".." || d.contains('/') {
        return Err(ApiError::bad_request(format!("invalid path segment {d:?}")));
    }
    Ok(d.into_owned())
}

/// Parse the path that remains after the cluster prefix.
pub fn parse_route(path: &str) -> Result<Route, ApiError> {
    // Slashes before the path and one after it are let be, as clients join a server URL that ends in
    // `/` loosely. An empty segment inside is an error, as in kube-apiserver: dropped, it would move the
    // others (`namespaces//configmaps` would read a namespace named "configmaps").
    let inner = path.trim_start_matches('/');
    let inner = inner.strip_suffix('/').unwrap_or(inner);
    // An empty path is one empty segment.
    let raw: Vec<&str> = inner.split('/').collect();
    if raw.iter().any(|s| s.is_empty()) {
        return Err(ApiError::path_not_found());
    }
    let parts = raw.iter().map(|s| decode_segment(s)).collect::<Result<Vec<String>, _>>()?;
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    let route = match p.as_slice() {
        ["version"] => Route::Version,
        ["healthz", ..] => Route::Health("healthz"),
        ["livez", ..] => Route::Health("livez"),
        ["readyz", ..] => Route::Health("readyz"),
        ["metrics"] => Route::Metrics,
        ["api"] => Route::Api,
        ["api", v] => Route::ApiVersion(v.to_string()),
        ["apis"] => Route::Apis,
        ["apis", g] => Route::ApiGroup(g.to_string()),
        ["apis", g, v] => Route::ApiGroupVersion(g.to_string(), v.to_string()),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3,
        ["openapi", "v3", rest @ ..] if !rest.is_empty() => Route::OpenApiV3Doc(rest.join("/")),
        ["api", v, rest @ ..] => Route::Resource(resource_path("", v, rest)?),
        ["apis", g, v, rest @ ..] => Route::Resource(resource_path(g, v, rest)?),
        _ => return Err(ApiError::path_not_found()),
    };
    Ok(route)
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Result<ResourcePath, ApiError> {
    let mut r = ResourcePath { group: group.into(), version: version.into(), ..Default::default() };
    let mut parts = rest;
    if parts.first() == Some(&"watch") {
        r.watch_path = true;
        parts = &parts[1..];
    }
    if parts.first() == Some(&"namespaces") && parts.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&parts[2]) {
        r.namespace = Some(parts[1].to_string());
        parts = &parts[2..];
    }
    match parts {
        [res] => r.resource = res.to_string(),
        [res, name] => {
            r.resource = res.to_string();
            r.name = Some(name.to_string());
        }
        [res, name, sub] => {
            r.resource = res.to_string();
            r.name = Some(name.to_string());
            r.subresource = Some(sub.to_string());
        }
        _ => return Err(ApiError::path_not_found()),
    }
    Ok(r)
}

/// Query parameters, parsed leniently (`?&`, `+` for spaces, repeated keys keep the first).
#[derive(Debug, Clone, Default)]
pub struct Query(HashMap<String, String>);

impl Query {
    /// Parse a raw query string.
    pub fn parse(q: Option<&str>) -> Self {
        let mut map = HashMap::new();
        if let Some(q) = q {
            for (k, v) in form_urlencoded::parse(q.as_bytes()) {
                if !k.is_empty() {
                    map.entry(k.into_owned()).or_insert_with(|| v.into_owned());
                }
            }
        }
        Query(map)
    }

    /// A parameter's value, if present.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.0.get(k).map(String::as_str)
    }

    /// A non-empty parameter value.
    pub fn non_empty(&self, k: &str) -> Option<&str> {
        self.get(k).filter(|v| !v.is_empty())
    }

    /// A boolean parameter (`true`, `1`).
    pub fn flag(&self, k: &str) -> Result<bool, ApiError> {
        match self.get(k) {
            None | Some("") | Some("false") | Some("0") => Ok(false),
            Some("true") | Some("1") => Ok(true),
            Some(v) => Err(ApiError::bad_request(format!("invalid value for {k}: {v:?}"))),
        }
    }

    /// An integer parameter.
    pub fn int(&self, k: &str) -> Result<Option<i64>, ApiError> {
        match self.non_empty(k) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {k}: {v:?}: must be an integer"))),
        }
    }

    /// Set a parameter (used when DeleteOptions bodies carry query-equivalent fields).
    pub fn set(&mut self, k: &str, v: String) {
        self.0.insert(k.to_string(), v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse_route(path).unwrap() {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let r = res("/api/v1/namespaces/default/configmaps/x");
        assert_eq!(
            (r.namespace.as_deref(), r.resource.as_str(), r.name.as_deref()),
            (Some("default"), "configmaps", Some("x"))
        );
        let r = res("/apis/apps/v1/namespaces/a/deployments/d/scale");
        assert_eq!((r.group.as_str(), r.subresource.as_deref()), ("apps", Some("scale")));
        let r = res("/api/v1/namespaces/foo");
        assert_eq!((r.resource.as_str(), r.name.as_deref(), r.namespace), ("namespaces", Some("foo"), None));
        let r = res("/api/v1/namespaces/foo/status");
        assert_eq!((r.name.as_deref(), r.subresource.as_deref()), (Some("foo"), Some("status")));
        let r = res("/api/v1/configmaps");
        assert_eq!((r.resource.as_str(), r.namespace), ("configmaps", None));
        let r = res("/api/v1/watch/namespaces/d/configmaps");
        assert!(r.watch_path);
        assert_eq!(r.namespace.as_deref(), Some("d"));
    }

    #[test]
    fn discovery_and_openapi() {
        assert_eq!(parse_route("/api").unwrap(), Route::Api);
        assert_eq!(parse_route("/apis/apps/v1/").unwrap(), Route::ApiGroupVersion("apps".into(), "v1".into()));
        assert_eq!(parse_route("/openapi/v3/apis/apps/v1").unwrap(), Route::OpenApiV3Doc("apis/apps/v1".into()));
        assert_eq!(parse_route("//version").unwrap(), Route::Version);
    }

    #[test]
    fn odd_paths_are_rejected() {
        assert_eq!(parse_route("/api/v1/namespaces/..%2Fx/configmaps").unwrap_err().code, 400);
        assert_eq!(parse_route("/api/v1/namespaces/%2e%2e/configmaps").unwrap_err().code, 400);
        assert_eq!(parse_route("/nope").unwrap_err().code, 404);
        assert_eq!(parse_route("/api/v1/a/b/c/d/e").unwrap_err().code, 404);
        for p in ["/api/v1/namespaces//configmaps", "/api/v1/namespaces/d//x", "/apis//v1/deployments", "/", ""] {
            assert_eq!(parse_route(p).unwrap_err().code, 404, "{p}");
        }
    }

    #[test]
    fn lenient_query() {
        let q = Query::parse(Some("&limit=500&labelSelector=app+in+%28a%2Cb%29&watch=1"));
        assert_eq!(q.get("labelSelector"), Some("app in (a,b)"));
        assert_eq!(q.int("limit").unwrap(), Some(500));
        assert!(q.flag("watch").unwrap());
        assert!(q.flag("bogus").is_ok());
        assert!(Query::parse(Some("watch=maybe")).flag("watch").is_err());
    }
}
