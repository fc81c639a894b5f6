//! Which logical cluster a request addresses: the `/clusters/<name>` path prefix, the
//! `X-Kubernetes-Cluster` header, or `root` by default (DESIGN.md section 1).

use crate::status::ApiError;

/// The header that names a logical cluster on un-prefixed paths.
pub const CLUSTER_HEADER: &str = "x-kubernetes-cluster";
/// The cluster every deployment has and un-addressed requests go to.
pub const ROOT: &str = "root";
/// The annotation carrying an object's cluster on every read; never stored.
pub const CLUSTER_ANNOTATION: &str = "kgate.dev/cluster";

/// The cluster a request targets.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ClusterTarget {
    /// One logical cluster.
    Named(String),
    /// `/clusters/*`: every logical cluster at once (list and watch only).
    Wildcard,
}

impl ClusterTarget {
    /// The cluster's name, or `None` for the wildcard.
    pub fn name(&self) -> Option<&str> {
        match self {
            ClusterTarget::Named(n) => Some(n),
            ClusterTarget::Wildcard => None,
        }
    }
}

/// Split the cluster from a request path and header. Returns the target and the path that remains
/// (always starting with `/`).
pub fn resolve<'a>(path: &'a str, header: Option<&str>) -> Result<(ClusterTarget, &'a str), ApiError> {
    let (from_path, rest) = match path.strip_prefix("/clusters/") {
        Some(tail) => {
            let (name, rest) = match tail.find('/') {
                Some(i) => (&tail[..i], &tail[i..]),
                None => (tail, "/"),
            };
            (Some(name), rest)
        }
        None if path == "/clusters" => return Err(ApiError::path_not_found()),
        None => (None, path),
    };
    // Clients percent-encode the segment (kubectl sends `*` as `%2A`); decode before judging it, so an
    // encoded `/` or `..` is rejected as a name rather than changing the path.
    let decoded = from_path.map(|p| percent_encoding::percent_decode_str(p).decode_utf8_lossy().into_owned());
    let from_path = decoded.as_deref();
    let header = header.map(str::trim).filter(|h| !h.is_empty());
    let name = match (from_path, header) {
        (Some(p), Some(h)) if p != h => {
            return Err(ApiError::bad_request(format!(
                "the cluster in the path ({p}) does not match the X-Kubernetes-Cluster header ({h})"
            )))
        }
        (Some(p), _) => p,
        (None, Some(h)) => h,
        (None, None) => ROOT,
    };
    if name == "*" {
        return Ok((ClusterTarget::Wildcard, rest));
    }
    validate_name(name)
        .map_err(|why| ApiError::bad_request(format!("invalid logical cluster name {name:?}: {why}")))?;
    Ok((ClusterTarget::Named(name.to_string()), rest))
}

/// A logical cluster name is a DNS-1123 label (it becomes one key segment, so it can never hold `/`).
pub fn validate_name(name: &str) -> Result<(), String> {
    crate::meta::validate_dns1123_label(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(n: &str) -> ClusterTarget {
        ClusterTarget::Named(n.to_string())
    }

    #[test]
    fn path_prefix_header_and_default() {
        assert_eq!(resolve("/clusters/team-a/api/v1", None).unwrap(), (named("team-a"), "/api/v1"));
        assert_eq!(resolve("/api/v1", Some("team-b")).unwrap(), (named("team-b"), "/api/v1"));
        assert_eq!(resolve("/api/v1", None).unwrap(), (named("root"), "/api/v1"));
        assert_eq!(resolve("/clusters/team-a", None).unwrap(), (named("team-a"), "/"));
        assert_eq!(resolve("/clusters/*/api/v1/configmaps", None).unwrap().0, ClusterTarget::Wildcard);
    }

    #[test]
    fn agreeing_header_is_fine_and_disagreeing_is_400() {
        assert!(resolve("/clusters/a/api", Some("a")).is_ok());
        let e = resolve("/clusters/a/api", Some("b")).unwrap_err();
        assert_eq!((e.code, e.reason), (400, "BadRequest"));
    }

    #[test]
    fn bad_names_are_400() {
        for p in ["/clusters/Team/api", "/clusters/a_b/api", "/clusters/-a/api", "/clusters//api", "/clusters/%2F/api"]
        {
            assert_eq!(resolve(p, None).unwrap_err().code, 400, "{p}");
        }
        assert_eq!(resolve("/api", Some("..")).unwrap_err().code, 400);
    }
}
