//! `--tenants-dir`: LogicalCluster manifests applied when the server starts.
//!
//! Every `*.yaml`, `*.yml` and `*.json` file directly in the directory (not in subdirectories, not
//! hidden), in name order, may hold several YAML documents or a `kind: List`. Each LogicalCluster is
//! server-side applied with the field manager [`FIELD_MANAGER`], forcing conflicts: created when missing,
//! its `spec`, labels and annotations made what the file says when present (labels and annotations the
//! file stops listing are removed, those set by others are kept), and never deleted — removing a file
//! removes nothing.
//!
//! A file that cannot be read or parsed, and a document that is not a valid LogicalCluster, is logged as
//! an error naming the file (and the document) and skipped; the server still starts. One tenant's bad
//! file must not take the API away from every other tenant at the next restart.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{json, Value};

use crate::auth::{Identity, MASTERS};
use crate::cluster::ROOT;
use crate::patch::PatchType;
use crate::registry::{Ctx, FieldValidation, Registry, WriteOptions};
use crate::resources;
use crate::status::ApiError;

/// The field manager that owns what the tenants directory sets.
pub const FIELD_MANAGER: &str = "kgate-tenants-dir";

/// Top-level fields a manifest may have; `status` is accepted and ignored, as `kubectl apply` does.
const TOP_LEVEL: &[&str] = &["apiVersion", "kind", "metadata", "spec", "status"];
/// `metadata` fields a manifest may set.
const METADATA: &[&str] = &["name", "labels", "annotations"];

/// Why a manifest, or one document of it, was not applied.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The directory could not be listed (the server does not start).
    #[error("tenants directory {}: {source}", path.display())]
    Dir {
        /// The directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid YAML or JSON; nothing in it was applied.
    #[error("{}: not valid {format}: {why}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// `YAML` or `JSON`.
        format: &'static str,
        /// The parser's message.
        why: String,
    },
    /// A document is not a LogicalCluster kgate can apply.
    #[error("{} (document {doc}): {why}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based index of the document in the file.
        doc: usize,
        /// What is wrong.
        why: String,
    },
    /// The server refused the LogicalCluster.
    #[error("{} (document {doc}): logicalcluster/{name}: {source}", path.display())]
    Apply {
        /// The file.
        path: PathBuf,
        /// 1-based index of the document in the file.
        doc: usize,
        /// The LogicalCluster's name.
        name: String,
        /// The refusal.
        #[source]
        source: ApiError,
    },
}

/// What [`apply_dir`] did.
#[derive(Debug, Default)]
pub struct Applied {
    /// Names of the LogicalClusters applied, in file order.
    pub clusters: Vec<String>,
    /// Files and documents skipped, each already logged.
    pub errors: Vec<ManifestError>,
}

/// Apply every LogicalCluster manifest in `dir` (see the module documentation). Fails only when the
/// directory cannot be listed; bad files are logged and returned in [`Applied::errors`].
pub async fn apply_dir(registry: &Registry, dir: &Path) -> Result<Applied, ManifestError> {
    let dir_error = |source| ManifestError::Dir { path: dir.to_path_buf(), source };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(dir_error)? {
        let path = entry.map_err(dir_error)?.path();
        let hidden = path.file_name().and_then(|n| n.to_str()).is_none_or(|n| n.starts_with('.'));
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !hidden && path.is_file() && matches!(ext, "yaml" | "yml" | "json") {
            files.push(path);
        }
    }
    files.sort();
    let mut applied = Applied::default();
    for path in files {
        let docs = match read_documents(&path) {
            Ok(docs) => docs,
            Err(e) => {
                tracing::error!(error = %e, "tenants directory: skipping a file");
                applied.errors.push(e);
                continue;
            }
        };
        for (i, doc) in docs.into_iter().enumerate() {
            match apply_document(registry, &path, i + 1, doc).await {
                Ok(Some(name)) => applied.clusters.push(name),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(error = %e, "tenants directory: skipping a LogicalCluster");
                    applied.errors.push(e);
                }
            }
        }
    }
    Ok(applied)
}

/// Every document of a file, `kind: List` items spread out; empty documents are `Null`.
fn read_documents(path: &Path) -> Result<Vec<Value>, ManifestError> {
    let bytes = std::fs::read(path).map_err(|source| ManifestError::Read { path: path.to_path_buf(), source })?;
    let docs: Vec<Value> = if path.extension().is_some_and(|e| e == "json") {
        let v = serde_json::from_slice(&bytes).map_err(|e| ManifestError::Parse {
            path: path.to_path_buf(),
            format: "JSON",
            why: e.to_string(),
        })?;
        vec![v]
    } else {
        // All documents parse or none is applied: after a syntax error, where documents begin is a guess.
        serde_yaml_ng::Deserializer::from_slice(&bytes)
            .map(Value::deserialize)
            .collect::<Result<_, _>>()
            .map_err(|e| ManifestError::Parse { path: path.to_path_buf(), format: "YAML", why: e.to_string() })?
    };
    Ok(docs
        .into_iter()
        .flat_map(|d| match (d["kind"].as_str(), d.get("items")) {
            (Some("List"), Some(Value::Array(items))) => items.clone(),
            _ => vec![d],
        })
        .collect())
}

/// Check one document and server-side apply it; `None` for an empty document.
async fn apply_document(
    registry: &Registry,
    path: &Path,
    doc: usize,
    obj: Value,
) -> Result<Option<String>, ManifestError> {
    if obj.is_null() {
        return Ok(None);
    }
    let invalid = |why: String| ManifestError::Invalid { path: path.to_path_buf(), doc, why };
    let applied = applicable(&obj).map_err(invalid)?;
    let name = applied["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let def = resources::logical_cluster_def();
    let user = Identity::from_cert("system:kgate".into(), vec![MASTERS.into()]);
    let ctx = Ctx { cluster: ROOT, def: &def, namespace: None, user: &user, user_agent: Some("kgate"), admit: None };
    let opts = WriteOptions {
        dry_run: false,
        field_manager: Some(FIELD_MANAGER.into()),
        field_validation: FieldValidation::Strict,
        force: Some(true),
    };
    let body = serde_json::to_vec(&applied).expect("JSON values always serialise");
    let written = registry
        .patch(&ctx, &name, PatchType::Apply, &body, &opts, None)
        .await
        .map_err(|source| ManifestError::Apply { path: path.to_path_buf(), doc, name: name.clone(), source })?;
    if written.body["metadata"].get("deletionTimestamp").is_some() {
        tracing::warn!(file = %path.display(), cluster = %name, "tenants directory: this LogicalCluster is being deleted; it is created again at the next start after it is gone");
    } else {
        let what = if written.code == 201 { "created" } else { "applied" };
        tracing::info!(file = %path.display(), cluster = %name, "tenants directory: logical cluster {what}");
    }
    Ok(Some(name))
}

/// The part of a manifest kgate applies, or why it cannot.
fn applicable(obj: &Value) -> Result<Value, String> {
    let Some(fields) = obj.as_object() else {
        return Err("not an object".into());
    };
    let want = format!("{}/{}", resources::TENANCY_GROUP, "v1alpha1");
    if obj["apiVersion"].as_str() != Some(want.as_str()) || obj["kind"] != "LogicalCluster" {
        return Err(format!(
            "only LogicalCluster objects (apiVersion: {want}) belong here, found kind {} apiVersion {}",
            obj["kind"], obj["apiVersion"]
        ));
    }
    if let Some(extra) = fields.keys().find(|k| !TOP_LEVEL.contains(&k.as_str())) {
        return Err(format!("unknown field {extra:?}"));
    }
    let Some(meta) = obj["metadata"].as_object() else {
        return Err("metadata.name is required".into());
    };
    if let Some(extra) = meta.keys().find(|k| !METADATA.contains(&k.as_str())) {
        return Err(format!("metadata.{extra} cannot be set from a tenants file (only name, labels and annotations)"));
    }
    if meta.get("name").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err("metadata.name is required".into());
    }
    let mut applied = json!({"apiVersion": want, "kind": "LogicalCluster", "metadata": meta});
    if let Some(spec) = obj.get("spec").filter(|s| !s.is_null()) {
        applied["spec"] = spec.clone();
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_logical_clusters_with_a_name_and_known_fields_apply() {
        let lc = |metadata: Value, more: Value| {
            let mut v =
                json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": metadata});
            for (k, x) in more.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        let named = || json!({"name": "a"});
        let ok = applicable(&lc(
            json!({"name": "a", "labels": {"team": "a"}}),
            json!({"spec": {"x": 1}, "status": {"phase": "Ready"}}),
        ))
        .unwrap();
        assert_eq!(ok["metadata"]["labels"]["team"], "a");
        assert_eq!(ok["spec"]["x"], 1);
        assert!(ok.get("status").is_none(), "status is kgate's");
        assert!(applicable(&lc(named(), json!({"kind": "ConfigMap"}))).unwrap_err().contains("only LogicalCluster"));
        assert!(applicable(&lc(json!({"labels": {}}), json!({}))).unwrap_err().contains("metadata.name"));
        let e = applicable(&lc(json!({"name": "a", "finalizers": ["x"]}), json!({}))).unwrap_err();
        assert!(e.contains("metadata.finalizers"), "{e}");
        assert!(applicable(&lc(named(), json!({"sepc": {}}))).unwrap_err().contains("sepc"));
        assert!(applicable(&json!([1])).is_err());
    }

    #[test]
    fn documents_lists_and_empty_documents() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = dir.path().join("t.yaml");
        std::fs::write(
            &yaml,
            "---\napiVersion: tenancy.kgate.dev/v1alpha1\nkind: LogicalCluster\nmetadata: {name: a}\n---\n---\nkind: List\napiVersion: v1\nitems:\n- {kind: LogicalCluster, metadata: {name: b}}\n",
        )
        .unwrap();
        let docs = read_documents(&yaml).unwrap();
        let names: Vec<&Value> = docs.iter().map(|d| &d["metadata"]["name"]).collect();
        assert_eq!(names, [&json!("a"), &Value::Null, &json!("b")]);
        let bad = dir.path().join("bad.yaml");
        std::fs::write(&bad, "a: [\n").unwrap();
        let e = read_documents(&bad).unwrap_err().to_string();
        assert!(e.starts_with(&bad.display().to_string()) && e.contains("not valid YAML"), "{e}");
        let json = dir.path().join("t.json");
        std::fs::write(&json, "{\"kind\": \"LogicalCluster\"").unwrap();
        assert!(read_documents(&json).unwrap_err().to_string().contains("not valid JSON"));
    }
}
