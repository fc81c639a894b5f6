//! What a DELETE asks of the garbage collector, as kube's generic registry writes it: the `orphan` or
//! `foregroundDeletion` finalizer, from the request's propagation policy, else the object's own
//! finalizers, else its type's default (`DefaultGarbageCollectionPolicy` of kube's strategies). The
//! collector (`crate::gc`) does the rest once it sees the object marked.

use serde_json::Value;

use super::options::Propagation;
use crate::meta;
use crate::resources::ResourceDef;

/// The finalizer that orphans an object's dependents before it goes.
pub const ORPHAN: &str = "orphan";
/// The finalizer that keeps an object until its blocking dependents are gone.
pub const FOREGROUND: &str = "foregroundDeletion";

/// A type's `DefaultGarbageCollectionPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    /// Dependents go after the owner (background), unless the request says otherwise.
    DeleteDependents,
    /// Dependents stay unless the request says otherwise: kept by kube for `batch/v1` Jobs and `v1`
    /// ReplicationControllers, whose clients of old expected it.
    OrphanDependents,
    /// The type takes neither finalizer (events).
    Unsupported,
}

fn policy(def: &ResourceDef) -> Policy {
    match (def.group.as_str(), def.version.as_str(), def.plural.as_str()) {
        ("" | "events.k8s.io", _, "events") => Policy::Unsupported,
        ("batch", "v1", "jobs") | ("", "v1", "replicationcontrollers") => Policy::OrphanDependents,
        _ => Policy::DeleteDependents,
    }
}

/// The finalizers a delete of `current` leaves it with, when they differ from what it has (kube's
/// `deletionFinalizersForGarbageCollection`): both GC finalizers are taken off, then the one the
/// request, the object or the type asks for is put back.
pub fn finalizers(def: &ResourceDef, current: &Value, asked: Option<Propagation>) -> Option<Vec<String>> {
    let policy = policy(def);
    if policy == Policy::Unsupported {
        return None;
    }
    let have = meta::finalizers(current);
    let has = |f: &str| have.iter().any(|h| h == f);
    let (orphan, foreground) = match asked {
        Some(Propagation::Orphan) => (true, false),
        Some(Propagation::Foreground) => (false, true),
        Some(Propagation::Background) => (false, false),
        None if has(ORPHAN) => (true, has(FOREGROUND)),
        None => (policy == Policy::OrphanDependents && !has(FOREGROUND), has(FOREGROUND)),
    };
    let mut next: Vec<String> = have.iter().filter(|f| *f != ORPHAN && *f != FOREGROUND).cloned().collect();
    if orphan {
        next.push(ORPHAN.into());
    }
    if foreground {
        next.push(FOREGROUND.into());
    }
    let same = next.len() == have.len() && next.iter().all(|f| has(f));
    (!same).then_some(next)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn def(group: &str, version: &str, plural: &str) -> ResourceDef {
        crate::resources::builtins()
            .iter()
            .find(|d| d.group == group && d.version == version && d.plural == plural)
            .map(|d| (**d).clone())
            .expect("a built-in")
    }

    #[test]
    fn the_request_decides_then_the_object_then_the_type() {
        let cm = def("", "v1", "configmaps");
        let plain = json!({"metadata": {"finalizers": ["example.com/keep"]}});
        assert_eq!(finalizers(&cm, &plain, None), None, "background by default: nothing to add");
        assert_eq!(
            finalizers(&cm, &plain, Some(Propagation::Foreground)),
            Some(vec!["example.com/keep".to_string(), FOREGROUND.to_string()])
        );
        assert_eq!(
            finalizers(&cm, &plain, Some(Propagation::Orphan)),
            Some(vec!["example.com/keep".to_string(), ORPHAN.to_string()])
        );
        let orphaning = json!({"metadata": {"finalizers": [ORPHAN]}});
        assert_eq!(finalizers(&cm, &orphaning, None), None, "the object's own finalizer stands");
        assert_eq!(finalizers(&cm, &orphaning, Some(Propagation::Background)), Some(vec![]));
        assert_eq!(finalizers(&cm, &orphaning, Some(Propagation::Foreground)), Some(vec![FOREGROUND.to_string()]));
    }

    #[test]
    fn jobs_and_replication_controllers_orphan_by_default_and_events_never_take_one() {
        let none = json!({"metadata": {}});
        assert_eq!(finalizers(&def("batch", "v1", "jobs"), &none, None), Some(vec![ORPHAN.to_string()]));
        assert_eq!(finalizers(&def("", "v1", "replicationcontrollers"), &none, None), Some(vec![ORPHAN.to_string()]));
        assert_eq!(finalizers(&def("batch", "v1", "jobs"), &none, Some(Propagation::Background)), None);
        assert_eq!(finalizers(&def("apps", "v1", "replicasets"), &none, None), None);
        assert_eq!(finalizers(&def("", "v1", "events"), &none, Some(Propagation::Foreground)), None);
        assert_eq!(finalizers(&def("events.k8s.io", "v1", "events"), &none, Some(Propagation::Orphan)), None);
    }
}
