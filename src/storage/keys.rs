//! The key layout of DESIGN.md section 2: `<prefix>/<group>/<resource>/<cluster>/[<namespace>/]<name>`.
//!
//! Every prefix handed to a range or watch ends with `/`, so cluster `a` never matches keys of `a-b`.

/// Key of one object.
pub fn object(prefix: &str, group: &str, resource: &str, cluster: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{prefix}/{group}/{resource}/{cluster}/{ns}/{name}"),
        None => format!("{prefix}/{group}/{resource}/{cluster}/{name}"),
    }
}

/// Prefix of a collection: every cluster (`cluster = None`), one cluster, or one namespace of one cluster.
pub fn collection(prefix: &str, group: &str, resource: &str, cluster: Option<&str>, namespace: Option<&str>) -> String {
    match (cluster, namespace) {
        (None, _) => format!("{prefix}/{group}/{resource}/"),
        (Some(c), None) => format!("{prefix}/{group}/{resource}/{c}/"),
        (Some(c), Some(ns)) => format!("{prefix}/{group}/{resource}/{c}/{ns}/"),
    }
}

/// The parts of an object key under a resource prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectKey<'a> {
    /// Logical cluster.
    pub cluster: &'a str,
    /// Namespace, for namespaced resources.
    pub namespace: Option<&'a str>,
    /// Object name.
    pub name: &'a str,
}

/// Split a key found under `resource_prefix` (from `collection(.., None, None)`).
pub fn parse<'a>(resource_prefix: &str, key: &'a str, namespaced: bool) -> Option<ObjectKey<'a>> {
    let rest = key.strip_prefix(resource_prefix)?;
    let mut parts = rest.splitn(3, '/');
    let cluster = parts.next()?;
    if namespaced {
        let ns = parts.next()?;
        let name = parts.next()?;
        Some(ObjectKey { cluster, namespace: Some(ns), name })
    } else {
        let name = parts.next()?;
        if parts.next().is_some() {
            return None;
        }
        Some(ObjectKey { cluster, namespace: None, name })
    }
}

/// The smallest key after every key starting with `prefix` (exclusive range end).
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        assert_eq!(
            object("/registry", "core", "configmaps", "team-a", Some("default"), "x"),
            "/registry/core/configmaps/team-a/default/x"
        );
        assert_eq!(
            object("/registry", "core", "namespaces", "root", None, "default"),
            "/registry/core/namespaces/root/default"
        );
        assert_eq!(collection("/registry", "apps", "deployments", Some("a"), None), "/registry/apps/deployments/a/");
        assert_eq!(collection("/registry", "apps", "deployments", None, None), "/registry/apps/deployments/");
    }

    #[test]
    fn cluster_prefixes_do_not_overlap() {
        let a = collection("/r", "core", "configmaps", Some("a"), None);
        let ab_key = object("/r", "core", "configmaps", "a-b", Some("default"), "x");
        assert!(!ab_key.starts_with(&a));
    }

    #[test]
    fn parse_round_trip() {
        let p = collection("/r", "core", "configmaps", None, None);
        let k = object("/r", "core", "configmaps", "c1", Some("ns"), "n");
        assert_eq!(parse(&p, &k, true), Some(ObjectKey { cluster: "c1", namespace: Some("ns"), name: "n" }));
        assert_eq!(parse(&p, "/r/core/configmaps/c1/n", false).unwrap().name, "n");
        assert_eq!(prefix_end("/a/"), b"/a0".to_vec());
    }
}
