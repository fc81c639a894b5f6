//! What a new logical cluster starts with, for its one atomic create: built and encoded once per
//! server configuration, then copied for each cluster with its own uids and creation time. Building
//! the thirty objects afresh (kube's default RBAC is most of their 19 KiB) and encoding them cost a
//! creation more CPU than all of its store calls.

use std::sync::{Arc, LazyLock, Mutex};

use super::{defaults_revision, fresh_values};
use crate::registry::Registry;

/// `uuid`'s hyphenated form.
const UID_LEN: usize = 36;
/// `meta::now_rfc3339`'s form, `2006-01-02T15:04:05Z`.
const TIME_LEN: usize = 20;

/// Stands for the cluster's name while the template is made: a NUL, which no prefix (a command-line
/// argument), group, resource or object name can hold.
const MARK: &str = "\0";

/// Templates kept, by what they are made from: one per server in the process (tests run several).
const KEPT: usize = 4;

/// One object of the template: its key around the cluster's name, and its encoded value with where
/// its uid and creation time are.
struct Item {
    key_head: String,
    key_tail: String,
    value: Vec<u8>,
    uid_at: usize,
    time_at: usize,
}

/// Every object a new cluster starts with, ready to be copied.
struct Template {
    items: Vec<Item>,
}

/// Templates by what they are made from: the store prefix and the defaults they hold
/// (`defaults_revision`).
type Kept = Vec<(String, Arc<Template>)>;

/// A `Mutex` around a short list: taken once per cluster created, to find and clone an `Arc`.
static TEMPLATES: LazyLock<Mutex<Kept>> = LazyLock::new(Default::default);

/// `super::fresh_values(registry, cluster)`, encoded: the same keys and values, each object with a
/// uid of its own and the same creation time.
pub(super) fn objects(registry: &Registry, cluster: &str) -> Vec<(String, Vec<u8>)> {
    let now = crate::meta::now_rfc3339();
    match template(registry) {
        Some(t) if now.len() == TIME_LEN && !cluster.contains(MARK) => t.copy(cluster, &now),
        _ => built(registry, cluster),
    }
}

/// The objects built and encoded one by one.
fn built(registry: &Registry, cluster: &str) -> Vec<(String, Vec<u8>)> {
    fresh_values(registry, cluster).into_iter().map(|(k, v)| (k, crate::registry::encode(&v))).collect()
}

fn template(registry: &Registry) -> Option<Arc<Template>> {
    let made_from = format!("{}\n{}", registry.prefix, defaults_revision(registry));
    let mut kept = TEMPLATES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, t)) = kept.iter().find(|(k, _)| *k == made_from) {
        return Some(t.clone());
    }
    let t = Arc::new(Template::make(registry)?);
    if kept.len() == KEPT {
        kept.remove(0);
    }
    kept.push((made_from, t.clone()));
    Some(t)
}

/// Where `field`'s string value `value` is in `bytes`, when it is there once and only once.
fn place_of(bytes: &[u8], field: &str, value: &str) -> Option<usize> {
    let needle = format!("\"{field}\":\"{value}\"");
    let at = bytes.windows(needle.len()).position(|w| w == needle.as_bytes())?;
    let again = bytes[at + 1..].windows(needle.len()).any(|w| w == needle.as_bytes());
    (!again).then_some(at + field.len() + 4)
}

impl Template {
    /// `None` when some object does not fit the copying (its name in a value, a uid or time found
    /// twice or of another width): then every cluster's are built.
    fn make(registry: &Registry) -> Option<Template> {
        let mut items = Vec::new();
        for (key, obj) in fresh_values(registry, MARK) {
            let (key_head, key_tail) = key.split_once(MARK)?;
            if key_tail.contains(MARK) {
                return None;
            }
            let uid = obj["metadata"]["uid"].as_str().filter(|u| u.len() == UID_LEN)?;
            let time = obj["metadata"]["creationTimestamp"].as_str().filter(|t| t.len() == TIME_LEN)?;
            let value = crate::registry::encode(&obj);
            if value.windows(MARK.len()).any(|w| w == MARK.as_bytes()) {
                return None;
            }
            let (uid_at, time_at) = (place_of(&value, "uid", uid)?, place_of(&value, "creationTimestamp", time)?);
            items.push(Item { key_head: key_head.into(), key_tail: key_tail.into(), value, uid_at, time_at });
        }
        Some(Template { items })
    }

    fn copy(&self, cluster: &str, now: &str) -> Vec<(String, Vec<u8>)> {
        let mut uid = [0u8; UID_LEN];
        self.items
            .iter()
            .map(|item| {
                let mut value = item.value.clone();
                uuid::Uuid::new_v4().hyphenated().encode_lower(&mut uid);
                value[item.uid_at..item.uid_at + UID_LEN].copy_from_slice(&uid);
                value[item.time_at..item.time_at + TIME_LEN].copy_from_slice(now.as_bytes());
                (format!("{}{cluster}{}", item.key_head, item.key_tail), value)
            })
            .collect()
    }
}

/// An object's value with its uid and creation time taken out, for comparing copies.
#[cfg(test)]
fn without_identity(value: &[u8]) -> (serde_json::Value, String, String) {
    let mut obj: serde_json::Value = serde_json::from_slice(value).unwrap();
    let meta = obj["metadata"].as_object_mut().unwrap();
    let uid = meta.remove("uid").unwrap().as_str().unwrap().to_string();
    let time = meta.remove("creationTimestamp").unwrap().as_str().unwrap().to_string();
    (obj, uid, time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::embedded::EmbeddedStore;

    /// A registry publishing a CA of its own (only its text matters here); the store is not used.
    fn registry(prefix: &str) -> (Registry, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(EmbeddedStore::open(dir.path()).unwrap());
        let facts = crate::registry::Published {
            ca_pem: format!("-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n", uuid::Uuid::new_v4()),
            ip: "127.0.0.1".parse().unwrap(),
            port: 6443,
        };
        (Registry::new(store, prefix).publishing(facts), dir)
    }

    #[test]
    fn copies_are_the_objects_built_with_uids_of_their_own() {
        let (registry, _dir) = registry("/registry");
        assert!(template(&registry).is_some(), "every default object fits the template");
        let copied = objects(&registry, "team-a");
        let made = built(&registry, "team-a");
        assert_eq!(copied.len(), made.len());
        assert!(copied.len() >= 30, "namespaces, their defaults, the API service and RBAC");
        let mut uids = std::collections::HashSet::new();
        for ((ck, cv), (mk, mv)) in copied.iter().zip(&made) {
            assert_eq!(ck, mk);
            let (c, uid, time) = without_identity(cv);
            let (m, _, _) = without_identity(mv);
            assert_eq!(c, m, "{ck}");
            assert!(uuid::Uuid::parse_str(&uid).is_ok_and(|u| u.get_version_num() == 4), "{uid}");
            assert!(uids.insert(uid), "every object has its own uid");
            assert!(chrono::DateTime::parse_from_rfc3339(&time).is_ok(), "{time}");
        }
        // Another cluster's copies are its own, and differ only in their keys' cluster and identity.
        let other = objects(&registry, "team-b");
        assert!(other.iter().all(|(k, _)| k.contains("/team-b/") && !k.contains("team-a")));
        assert!(other.iter().all(|(_, v)| !uids.contains(&without_identity(v).1)));
    }

    #[test]
    fn a_template_per_prefix_and_defaults() {
        let ((a, _da), (b, _db)) = (registry("/one"), registry("/two"));
        assert!(objects(&a, "c").iter().all(|(k, _)| k.starts_with("/one/")));
        assert!(objects(&b, "c").iter().all(|(k, _)| k.starts_with("/two/")));
        // Another CA is other defaults: its own template, publishing its own CA.
        let (c, _dc) = registry("/one");
        let ca = c.published.as_ref().unwrap().ca_pem.clone();
        let copied = objects(&c, "c");
        let root_ca = copied.iter().find(|(k, _)| k.contains("/configmaps/c/default/")).unwrap();
        let cm: serde_json::Value = serde_json::from_slice(&root_ca.1).unwrap();
        assert_eq!(cm["data"]["ca.crt"], ca.as_str());
    }
}
