//! Writes: create, update, patch, delete and deletecollection, with the metadata, precondition,
//! subresource and finalizer rules of kube-apiserver's generic registry.

use serde_json::{json, Map, Value};

use super::options::{DeleteOptions, FieldValidation, ListOptions, WriteOptions};
use super::{Ctx, Registry, Written, ROOT_CA_CONFIGMAP};
use crate::meta::{self, now_rfc3339};
use crate::patch::{self, PatchType};
use crate::resources::ResourceDef;
use crate::status::{cause, success_status, ApiError, ApiResult};
use crate::storage::{keys, Guard, KeyValue, StoreError};

/// How many times a read-modify-write retries after losing a compare-and-swap.
pub(super) const MAX_RETRIES: usize = 16;

/// Keys read per page by a sweep: bounds the memory and the size of each store read.
const SWEEP_PAGE: usize = 500;
/// Deletes in flight at once within a page: each is one store round trip, and etcd commits concurrent
/// ones together.
const SWEEP_CONCURRENCY: usize = 16;
/// Passes before a sweep gives up on writers that keep adding keys.
const SWEEP_PASSES: usize = 10;
/// First and longest pause between sweeps of a namespace whose objects wait for their finalizers. Each
/// sweep reads every resource prefix of the namespace, so the longest pause bounds what a tenant's
/// held namespaces cost the store (kube's namespace controller backs off to a minute).
const HELD_PAUSE: std::time::Duration = std::time::Duration::from_millis(100);
const HELD_PAUSE_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// How a [`Registry::delete_prefixes`] sweep ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sweep {
    /// A whole pass found no key left (or, with [`Finalizers::Ignore`], deleted all it found).
    Empty,
    /// Keys were still being written after every pass.
    KeysLeft,
    /// `keep_going` said stop; keys may be left.
    Stopped,
    /// Only objects waiting for their finalizers are left (marked deleted; see [`Finalizers::Honor`]).
    Held(Remaining),
}

/// The objects a sweep left for their finalizers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remaining {
    /// How many under each prefix, in the order the sweep was given them.
    pub per_prefix: Vec<usize>,
    /// How many each finalizer holds.
    pub finalizers: std::collections::BTreeMap<String, usize>,
}

/// What a sweep does with an object that still has finalizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finalizers {
    /// Mark it deleted and leave it to the finalizers' owners, as kube's namespace controller does
    /// (its DELETE of each object defers to finalizers); the sweep ends [`Sweep::Held`] while only such
    /// objects remain.
    Honor,
    /// Delete it anyway: the purge of a deleted logical cluster, where no controller is left to finish.
    /// A pass that deletes every key it read, each prefix read to its end, ends the sweep without a
    /// second pass to confirm: the LogicalCluster's deletion purges once more, after it is gone, and
    /// that catches what raced this one (as a second pass here would, one read per resource sooner).
    Ignore,
}

/// Set what a deferred delete sets on an object with finalizers.
fn mark_deleted(obj: &mut Value) {
    set_meta(obj, "deletionTimestamp", json!(now_rfc3339()));
    set_meta(obj, "deletionGracePeriodSeconds", json!(0));
}

/// Field paths under `metadata` the server owns.
const SERVER_META: &[&str] =
    &["uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"];

/// The key strategic merge patch and the field manager know a built-in kind by.
fn kind_key(def: &ResourceDef) -> String {
    format!("{}/{}/{}", def.group, def.version, def.kind)
}

/// Check `apiVersion`/`kind` of a body against the URL, filling them in when absent.
fn check_type(def: &ResourceDef, obj: &mut Value) -> ApiResult<()> {
    let Some(m) = obj.as_object_mut() else {
        return Err(ApiError::bad_request("the request body must be a JSON or YAML object"));
    };
    let expected = def.api_version();
    match m.get("apiVersion") {
        Some(Value::String(v)) if *v != expected => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )))
        }
        Some(Value::String(_)) | None | Some(Value::Null) => {}
        Some(_) => return Err(ApiError::bad_request("apiVersion must be a string")),
    }
    match m.get("kind") {
        Some(Value::String(k)) if *k != def.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                def.kind
            )))
        }
        Some(Value::String(_)) | None | Some(Value::Null) => {}
        Some(_) => return Err(ApiError::bad_request("kind must be a string")),
    }
    m.insert("apiVersion".into(), Value::String(expected));
    m.insert("kind".into(), Value::String(def.kind.clone()));
    match m.get("metadata") {
        None | Some(Value::Null) => {
            m.insert("metadata".into(), Value::Object(Map::new()));
        }
        Some(Value::Object(_)) => {}
        Some(_) => return Err(ApiError::bad_request("metadata must be an object")),
    }
    Ok(())
}

/// Schema checks: type errors always fail; unknown fields fail, warn or vanish per `fieldValidation`.
fn check_schema(def: &ResourceDef, obj: &mut Value, validation: FieldValidation) -> ApiResult<Vec<String>> {
    let unknown = match &def.custom {
        Some(custom) => {
            // A custom resource: its CRD version's structural schema (value errors come later, as a 422).
            let Some(schema) = custom.schema.as_deref() else { return Ok(Vec::new()) };
            crate::crd::schema::apply_defaults(schema, obj).map_err(|e| ApiError::too_large_because(e.to_string()))?;
            let unknown = crate::crd::schema::unknown_fields(schema, obj);
            if !unknown.is_empty() && validation != FieldValidation::Strict {
                crate::crd::schema::prune(schema, obj);
            }
            unknown
        }
        None => {
            type_defaults(def, obj);
            let schemas = crate::openapi::Builtins::get();
            if !schemas.has_kind(&def.group, &def.version, &def.kind) {
                return Ok(Vec::new());
            }
            let type_errors = schemas.type_errors(&def.group, &def.version, &def.kind, obj);
            if !type_errors.is_empty() {
                let kind = &def.kind;
                let why = type_errors.join(", ");
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{}\" cannot be handled as a {kind}: {why}",
                    def.version
                )));
            }
            let mut unknown = schemas.unknown_fields(&def.group, &def.version, &def.kind, obj);
            if !unknown.is_empty() && validation != FieldValidation::Strict {
                schemas.prune(&def.group, &def.version, &def.kind, obj);
            }
            if def.group.is_empty() && def.kind == "Secret" {
                merge_string_data(obj);
            }
            unknown.truncate(crate::codec::MAX_FIELD_ERRORS);
            unknown
        }
    };
    if unknown.is_empty() {
        return Ok(Vec::new());
    }
    match validation {
        FieldValidation::Strict => {
            let list: Vec<String> = unknown.iter().map(|f| format!("unknown field \"{f}\"")).collect();
            Err(ApiError::bad_request(format!("strict decoding error: {}", list.join(", "))))
        }
        FieldValidation::Warn => Ok(unknown.into_iter().map(|f| format!("unknown field \"{f}\"")).collect()),
        FieldValidation::Ignore => Ok(Vec::new()),
    }
}

/// Built-ins are stored and answered as kube-apiserver writes them: as Go encodes the decoded object.
fn go_shape(def: &ResourceDef, obj: &mut Value) {
    if def.custom.is_none() {
        crate::proto::go_shape(&def.api_version(), &def.kind, obj);
    }
}

/// Whether an immediate delete answers the deleted object rather than a Status: the built-ins whose
/// registry in kube-apiserver 1.33 sets `ReturnDeletedObject` (typed clients parse the answer as one).
fn returns_deleted_object(def: &ResourceDef) -> bool {
    const RETURNS_OBJECT: &[(&str, &str)] = &[
        ("", "pods"),
        ("", "services"),
        ("", "namespaces"),
        ("", "persistentvolumes"),
        ("", "persistentvolumeclaims"),
        ("", "serviceaccounts"),
        ("", "podtemplates"),
        ("", "resourcequotas"),
        ("storage.k8s.io", "storageclasses"),
        ("storage.k8s.io", "volumeattachments"),
        ("storage.k8s.io", "csidrivers"),
        ("storage.k8s.io", "csinodes"),
    ];
    def.custom.is_none() && RETURNS_OBJECT.iter().any(|(g, p)| *g == def.group && *p == def.plural)
}

/// A Secret's `stringData` goes into `data`, base64-encoded, over any key of the same name, and is never
/// stored: kube's conversion of a v1 Secret does this on every write.
fn merge_string_data(obj: &mut Value) {
    use base64::Engine;
    let Some(m) = obj.as_object_mut() else { return };
    let Some(Value::Object(plain)) = m.remove("stringData") else { return };
    if plain.is_empty() {
        return;
    }
    if !m.get("data").is_some_and(Value::is_object) {
        m.insert("data".into(), json!({}));
    }
    let data = m.get_mut("data").and_then(Value::as_object_mut).expect("set above");
    for (k, v) in plain {
        let text = v.as_str().unwrap_or_default();
        data.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(text)));
    }
}

/// Quantities kube's decoder would refuse (`cpu: abc`), refused with its words as a body that does not
/// decode, but for those the stored object already holds: kgate stored them before it read them as
/// kube does, and such an object must still take its status, its finalizers' removal and its labels.
fn check_quantities(def: &ResourceDef, obj: &Value, old: Option<&Value>) -> ApiResult<()> {
    if def.custom.is_some() {
        return Ok(());
    }
    let schemas = crate::openapi::Builtins::get();
    let errors = |v: &Value| schemas.quantity_errors(&def.group, &def.version, &def.kind, v);
    let found = errors(obj);
    if found.is_empty() {
        return Ok(());
    }
    let held: std::collections::HashSet<String> =
        old.map(|o| errors(o).into_iter().map(|(text, _)| text).collect()).unwrap_or_default();
    match found.into_iter().find(|(text, _)| !held.contains(text)) {
        Some((_, why)) => {
            let kind = &def.kind;
            let version = &def.version;
            Err(ApiError::bad_request(format!("{kind} in version \"{version}\" cannot be handled as a {kind}: {why}")))
        }
        None => Ok(()),
    }
}

/// Checks of one type beyond metadata: a CRD's definition, a custom object's values against its schema.
/// `through` names the subresource an update is written through.
fn validate_kind(def: &ResourceDef, obj: &Value, old: Option<&Value>, through: Option<&str>) -> ApiResult<()> {
    if super::converts(def) {
        // What cannot be stored is refused before anything is written, dry run or not.
        super::convert::to_storage(def, &mut obj.clone())?;
    }
    let mut causes = match &def.custom {
        Some(c) => c.schema.as_deref().map(|s| crate::crd::schema::value_errors(s, obj)).unwrap_or_default(),
        None if def.group == "apiextensions.k8s.io" && def.kind == "CustomResourceDefinition" => {
            crate::crd::define::validate(obj, old)
        }
        None if def.group.is_empty() && def.kind == "Pod" => {
            // kube's `ValidatePodEphemeralContainersUpdate`: a static pod's mirror takes none, and says
            // only that.
            let mirror = old.and_then(|o| o["metadata"]["annotations"].get("kubernetes.io/config.mirror"));
            if through == Some("ephemeralcontainers") && mirror.is_some() {
                // kube's root path, `field.NewPath("")`, prints as `[]`.
                let why = "Forbidden: static pods do not support ephemeral containers";
                return Err(invalid(
                    def,
                    meta::meta_str(obj, "name").unwrap_or_default(),
                    vec![cause("FieldValueForbidden", "[]", why)],
                ));
            }
            let mut causes = old.map(|o| ephemeral_container_changes(o, obj)).unwrap_or_default();
            causes.extend(type_errors(def, obj, old, through));
            causes
        }
        None if def.group == "certificates.k8s.io" && def.kind == "CertificateSigningRequest" => {
            // A create's status is dropped (kube clears it); an update keeps the stored spec
            // (`prepare_update`): so decisions are checked on updates, the request on creates.
            match old {
                Some(_) => csr_decision_errors(obj, old),
                None => type_errors(def, obj, None, through),
            }
        }
        None => type_errors(def, obj, old, through),
    };
    // A status write is checked by its status, as kube's status strategies check it.
    if let (Some(old), Some("status"), None) = (old, through, &def.custom) {
        causes.extend(super::validation::status_errors(&def.kind, old, obj));
    }
    if let (Some(old), Some("resize")) = (old, through) {
        causes.extend(super::qos::resize_errors(old, obj));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(def, meta::meta_str(obj, "name").unwrap_or_default(), causes))
    }
}

/// The revision a stored object was written at (0, which the watch has passed, if it says none).
fn revision_of(obj: &Value) -> i64 {
    meta::meta_str(obj, "resourceVersion").and_then(|r| r.parse().ok()).unwrap_or(0)
}

/// kube's checks of the type (`validation`), on a create, and on an update that changes more than
/// metadata and status: a status write is checked as kube's status strategies check it, by its
/// status alone, so an object stored before a check existed still takes its status. What an update
/// may not change is checked on writes of the object itself: a subresource (a pod's binding, resize or
/// ephemeral containers) changes what kube lets it change.
fn type_errors(
    def: &ResourceDef,
    obj: &Value,
    old: Option<&Value>,
    through: Option<&str>,
) -> Vec<crate::status::Cause> {
    fn content(v: &Value) -> Vec<(&String, &Value)> {
        v.as_object().into_iter().flatten().filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status")).collect()
    }
    // A pod's annotations are read by kube's checks too (mirror pod, deletion cost, seccomp, AppArmor).
    fn annotations(v: &Value) -> Option<&Value> {
        meta::metadata(v).and_then(|m| m.get("annotations")).filter(|a| !a.is_null())
    }
    let same = |o: &Value| content(o) == content(obj) && (def.kind != "Pod" || annotations(o) == annotations(obj));
    // kube's binding writes the node to storage unchecked: a pod stored before a check existed is
    // still scheduled.
    if old.is_some_and(same) || through == Some("binding") {
        return Vec::new();
    }
    let mut causes = match (old, through) {
        (Some(o), None) => super::validation::update_errors(&def.kind, o, obj),
        _ => Vec::new(),
    };
    causes.extend(super::validation::errors(&def.api_version(), &def.kind, obj, old));
    causes
}

/// Who asks for a certificate is who sent the request, whatever its body claims (kube's CSR strategy,
/// `PrepareForCreate`): signers and approvers decide by these fields.
fn requested_by(csr: &mut Value, user: &crate::auth::Identity) {
    let Some(spec) = csr.get_mut("spec").and_then(Value::as_object_mut) else { return };
    for field in ["uid", "extra"] {
        spec.remove(field);
    }
    spec.insert("username".into(), json!(user.user));
    spec.insert("groups".into(), json!(user.groups));
}

/// The decisions on a CertificateSigningRequest: an `Approved`, `Denied` or `Failed` condition is there
/// to stay once given, through every path (the approval's too), and never both `Approved` and `Denied`,
/// as kube validates them.
fn csr_decision_errors(new: &Value, old: Option<&Value>) -> Vec<crate::status::Cause> {
    let types = |v: &Value| -> Vec<String> {
        v["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["type"].as_str())
            .map(str::to_string)
            .collect()
    };
    let now = types(new);
    let mut causes = Vec::new();
    if now.iter().any(|t| t == "Approved") && now.iter().any(|t| t == "Denied") {
        causes.push(cause(
            "FieldValueInvalid",
            "status.conditions",
            "Invalid value: \"Denied\": Approved and Denied conditions are mutually exclusive",
        ));
    }
    let before = old.map(types).unwrap_or_default();
    let count = |of: &[String], t: &str| of.iter().filter(|x| *x == t).count();
    for kept in ["Approved", "Denied", "Failed"] {
        if count(&now, kept) < count(&before, kept) {
            causes.push(cause(
                "FieldValueForbidden",
                "status.conditions",
                format!("Forbidden: updates may not remove a condition of type {kept:?}"),
            ));
        }
    }
    causes
}

/// kube's rule for a pod's ephemeral containers: they are added, never removed or changed.
fn ephemeral_container_changes(old: &Value, new: &Value) -> Vec<crate::status::Cause> {
    fn list(v: &Value) -> &[Value] {
        v["spec"]["ephemeralContainers"].as_array().map_or(&[][..], Vec::as_slice)
    }
    // By name, as kube's map: not each old one searched for among the new.
    let new: std::collections::HashMap<&str, &Value> =
        list(new).iter().map(|c| (c["name"].as_str().unwrap_or_default(), c)).collect();
    let mut causes = Vec::new();
    for before in list(old) {
        let name = before["name"].as_str().unwrap_or_default();
        let why = match new.get(name) {
            None => "may not be removed",
            Some(after) if *after != before => "may not be changed",
            Some(_) => continue,
        };
        let message = format!("Forbidden: existing ephemeral containers \"{name}\" {why}");
        causes.push(cause("FieldValueForbidden", "spec.ephemeralContainers", message));
    }
    causes
}

/// A Service's update rules (kept addresses, a refused new one), on every update path but status.
fn service_update(def: &ResourceDef, current: &Value, desired: &mut Value, subresource: Option<&str>) -> ApiResult<()> {
    if !(def.group.is_empty() && def.kind == "Service" && subresource.is_none()) {
        return Ok(());
    }
    let causes = super::services::update(current, desired);
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(def, meta::meta_str(current, "name").unwrap_or_default(), causes))
    }
}

/// Metadata and type checks, on every write path.
/// How much deeper than an object its managedFields' `fieldsV1` nests (`metadata`, the list, an entry,
/// `fieldsV1`), and one more to spare.
const MANAGED_FIELDS_DEPTH: usize = 5;

fn validate_object(ctx: &Ctx, obj: &Value, old: Option<&Value>, through: Option<&str>) -> ApiResult<()> {
    // What is stored must read back: a patch or defaults can nest deeper than a body may, and the
    // managedFields recorded after this check mirror the object four levels further down.
    let deepest = meta::MAX_NESTING - MANAGED_FIELDS_DEPTH;
    if meta::nesting(obj, deepest) > deepest {
        return Err(ApiError::bad_request(format!(
            "the object nests objects and arrays more than {deepest} levels deep"
        )));
    }
    validate_meta(ctx, obj)?;
    validate_kind(ctx.def, obj, old, through)
}

fn invalid(def: &ResourceDef, name: &str, causes: Vec<crate::status::Cause>) -> ApiError {
    ApiError::invalid(&def.kind, &def.group, name, causes)
}

/// Metadata rules shared by create and update.
fn validate_meta(ctx: &Ctx, obj: &Value) -> ApiResult<()> {
    let def = ctx.def;
    let meta = meta::metadata(obj).cloned().unwrap_or_default();
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    let mut causes = Vec::new();
    for e in def.name_rule.errors(name) {
        causes.push(cause("FieldValueInvalid", "metadata.name", format!("Invalid value: {name:?}: {e}")));
    }
    if def.namespaced {
        if let (Some(url_ns), Some(body_ns)) = (ctx.namespace, meta.get("namespace").and_then(Value::as_str)) {
            if !body_ns.is_empty() && body_ns != url_ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    }
    causes.extend(meta::validate_labels_annotations(&meta));
    let fins = meta::finalizers(obj);
    let gc = [super::propagation::ORPHAN, super::propagation::FOREGROUND];
    if gc.iter().all(|g| fins.iter().any(|f| f == g)) {
        let listed: Vec<String> = fins.iter().map(|f| format!("{f:?}")).collect();
        causes.push(cause(
            "FieldValueInvalid",
            "metadata.finalizers",
            format!(
                "Invalid value: []string{{{}}}: finalizer orphan and foregroundDeletion cannot be both set",
                listed.join(", ")
            ),
        ));
    }
    if let Some(f) = meta.get("finalizers") {
        let ok = f
            .as_array()
            .is_some_and(|a| a.iter().all(|v| v.as_str().is_some_and(|s| meta::qualified_name_errors(s).is_empty())));
        if !ok && !f.is_null() {
            causes.push(cause(
                "FieldValueInvalid",
                "metadata.finalizers",
                "Invalid value: must be a list of qualified names",
            ));
        }
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(invalid(def, name, causes))
    }
}

/// kube's defaults of the built-in types that clients read back. kube applies them as it decodes any
/// object, so here every write applies them (create, update and patch alike):
/// `kubectl replace` with a manifest that leaves one out gets it back, as from kube. Objects of the wrong
/// shape are left for the type check to refuse.
fn type_defaults(def: &ResourceDef, obj: &mut Value) {
    super::defaults::apply(&def.api_version(), &def.kind, obj);
    let Some(m) = obj.as_object_mut() else { return };
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Service") => {
            if let Some(spec) = spec_of(m) {
                super::services::defaults(spec);
            }
        }
        ("autoscaling", "HorizontalPodAutoscaler") => {
            if let Some(spec) = spec_of(m) {
                autoscaler_defaults(spec, def.version == "v2");
            }
        }
        _ => {}
    }
}

/// kube's autoscaling defaults: one replica at least; in v2 (where v1's implied target is explicit in
/// conversion) a CPU target of 80%, and a behavior given in part completed with the controller's
/// historic rules, as `pkg/apis/autoscaling/v2/defaults.go` has them.
fn autoscaler_defaults(spec: &mut Map<String, Value>, v2: bool) {
    default_to(spec, "minReplicas", json!(1));
    if !v2 {
        return;
    }
    if spec.get("metrics").and_then(Value::as_array).is_none_or(Vec::is_empty) {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    let Some(behavior) = spec.get_mut("behavior").filter(|b| b.is_object()).and_then(Value::as_object_mut) else {
        return;
    };
    let rules = [
        (
            "scaleUp",
            json!({"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}]}),
        ),
        // No stabilization window: the controller's flag decides it.
        (
            "scaleDown",
            json!({"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}),
        ),
    ];
    for (which, defaults) in rules {
        let Some(given) = object_or_null(behavior.entry(which).or_insert(Value::Null)) else { continue };
        for (field, value) in defaults.as_object().into_iter().flatten() {
            default_to(given, field, value.clone());
        }
    }
}

/// Set a field to `value` when it is absent or null (kube decodes an explicit null as an absent field,
/// then defaults it).
pub(super) fn default_to(m: &mut Map<String, Value>, field: &str, value: Value) {
    let v = m.entry(field).or_insert(Value::Null);
    if v.is_null() {
        *v = value;
    }
}

/// An object's spec, made empty when absent or null; `None` when it is something else.
fn spec_of(m: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    object_or_null(m.entry("spec").or_insert(Value::Null))
}

/// `v` as an object, made empty when null (kube decodes an explicit null as an absent field); `None`
/// when it is something else.
pub(super) fn object_or_null(v: &mut Value) -> Option<&mut Map<String, Value>> {
    if v.is_null() {
        *v = json!({});
    }
    v.as_object_mut()
}

/// What kube-apiserver sets on a new object of a built-in type beyond `type_defaults`: status,
/// finalizers, a Service's address.
fn apply_defaults(def: &ResourceDef, obj: &mut Value) {
    let m = obj.as_object_mut().expect("checked object");
    match (def.group.as_str(), def.kind.as_str()) {
        ("", "Namespace") => {
            let spec = m.entry("spec").or_insert_with(|| json!({}));
            if spec.get("finalizers").is_none() {
                spec["finalizers"] = json!(["kubernetes"]);
            }
            m.insert("status".into(), json!({"phase": "Active"}));
        }
        ("", "Service") => {
            if let Some(spec) = spec_of(m) {
                super::services::allocate(spec);
            }
            m.insert("status".into(), json!({"loadBalancer": {}}));
        }
        ("", "Pod") => {
            let qos = super::qos::class(obj);
            let m = obj.as_object_mut().expect("checked object");
            m.insert("status".into(), json!({"phase": "Pending", "qosClass": qos}));
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let now = now_rfc3339();
            m.insert(
                "status".into(),
                json!({
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}
                    ]
                }),
            );
            let current = obj.clone();
            crate::crd::refresh_status(&current, obj);
            // As kube-apiserver: the CRD's objects are deleted before the CRD itself goes.
            let m = meta::metadata_mut(obj);
            let fins = m.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(a) = fins.as_array_mut() {
                if !a.iter().any(|f| f == crate::crd::CLEANUP_FINALIZER) {
                    a.push(json!(crate::crd::CLEANUP_FINALIZER));
                }
            }
        }
        // kube-apiserver drops status on create when it is a subresource of a custom resource.
        _ if def.custom.is_some() && def.status => {
            m.remove("status");
        }
        _ if def.custom.is_some() => {}
        _ if def.status => {
            m.insert("status".into(), json!({}));
        }
        _ => {}
    }
}

fn set_meta(obj: &mut Value, field: &str, v: Value) {
    meta::metadata_mut(obj).insert(field.into(), v);
}

/// Copy the server-owned metadata of `from` onto `to`.
fn keep_server_meta(from: &Value, to: &mut Value) {
    let old = meta::metadata(from).cloned().unwrap_or_default();
    let new = meta::metadata_mut(to);
    for f in SERVER_META {
        match old.get(*f) {
            Some(v) => {
                new.insert(f.to_string(), v.clone());
            }
            None => {
                new.remove(*f);
            }
        }
    }
    for f in ["name", "namespace"] {
        if let Some(v) = old.get(f) {
            new.insert(f.into(), v.clone());
        }
    }
}

/// Two objects are the same write if they differ only in resourceVersion, managedFields and the
/// cluster annotation.
fn same_object(a: &Value, b: &Value) -> bool {
    // Only metadata differs in what is compared: the rest is compared as it is, not copied.
    let meta = |v: &Value| {
        let mut holder = json!({"metadata": v.get("metadata").cloned()});
        super::strip_derived(&mut holder);
        if let Some(m) = holder["metadata"].as_object_mut() {
            m.remove("managedFields");
        }
        holder["metadata"].take()
    };
    match (a.as_object(), b.as_object()) {
        (Some(x), Some(y)) => {
            let rest = |m: &'_ Map<String, Value>| m.iter().filter(|(k, _)| *k != "metadata").count();
            rest(x) == rest(y)
                && x.iter().filter(|(k, _)| *k != "metadata").all(|(k, v)| y.get(k) == Some(v))
                && meta(a) == meta(b)
        }
        _ => a == b,
    }
}

/// The namespace whose revision guards a cluster-wide create (see `Registry::namespace_guard`).
const CLUSTER_ANCHOR: &str = "kube-system";

/// What a create finds of the namespace it goes into.
enum Namespace {
    /// Taking new objects, stored under this guard.
    Active(Guard),
    Missing,
    Terminating,
}

impl Registry {
    async fn current(&self, ctx: &Ctx<'_>, name: &str) -> ApiResult<(KeyValue, Value)> {
        let key = self.key(ctx, name);
        match self.store.get(&key).await? {
            Some(kv) => {
                let obj = self.decode(ctx.def, ctx.cluster, &kv)?;
                Ok((kv, obj))
            }
            None => Err(ApiError::not_found(&ctx.def.plural, &ctx.def.group, name)),
        }
    }

    /// The namespace must exist and not be terminating before anything is created in it. Returns the
    /// guard the create is stored under: the namespace's revision when it was seen active. `fresh`
    /// skips what this replica remembers and reads the store (after the guard failed).
    ///
    /// A cluster-wide object is stored under the guard of its cluster's `kube-system` namespace, which
    /// lives as long as the cluster (kube refuses to delete it) and which a purge deletes: once it is
    /// gone, nothing more can be created in the cluster, by whichever replica still takes it for live,
    /// so a purge's pass that finds the cluster empty is its last whatever happens to the leader next.
    /// (Namespaced objects are already held by their own namespace.) Root is never purged.
    async fn namespace_guard(&self, ctx: &Ctx<'_>, fresh: bool) -> ApiResult<Option<Guard>> {
        let Some(ns) = ctx.namespace.filter(|_| ctx.def.namespaced) else {
            if ctx.cluster == crate::cluster::ROOT {
                return Ok(None);
            }
            return match self.anchor_guard(ctx.cluster, fresh).await? {
                Some(guard) => Ok(Some(guard)),
                None if self.logical_cluster(ctx.cluster).await?.is_some_and(|(_, live)| live) => {
                    Err(ApiError::unavailable(format!(
                        "logical cluster {:?} is still being initialized; try again",
                        ctx.cluster
                    )))
                }
                None => {
                    let mut e = ApiError::forbidden(format!(
                        "{} is forbidden: unable to create new content in logical cluster {:?} because it is being deleted",
                        ctx.def.plural, ctx.cluster,
                    ));
                    e.kind = Some(ctx.def.plural.clone());
                    Err(e)
                }
            };
        };
        match self.namespace_state(ctx.cluster, ns, fresh).await? {
            Namespace::Active(guard) => Ok(Some(guard)),
            Namespace::Missing => Err(ApiError::not_found("namespaces", "", ns)),
            Namespace::Terminating => {
                let mut e = ApiError::forbidden(format!(
                    "{} is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    ctx.def.plural,
                ));
                e.kind = Some(ctx.def.plural.clone());
                Err(e)
            }
        }
    }

    /// The guard of `cluster`'s `kube-system` while it is there, whatever its phase (a tenant may write
    /// any phase into a namespace's status; it cannot delete this one). Read from what this replica
    /// saw active, else relaxed, else a quorum read; a stale revision only fails the create's compare.
    async fn anchor_guard(&self, cluster: &str, fresh: bool) -> ApiResult<Option<Guard>> {
        let key = crate::storage::keys::object(&self.prefix, "core", "namespaces", cluster, None, CLUSTER_ANCHOR);
        if !fresh {
            if let Some(g) = self.namespaces.guard(&key) {
                return Ok(Some(g));
            }
        }
        let relaxed = if fresh { None } else { self.store.get_relaxed(&key).await? };
        let found = match relaxed {
            Some(kv) => Some(kv),
            None => self.store.get(&key).await?,
        };
        let Some(kv) = found else { return Ok(None) };
        // Remembered as namespaced creates remember it, so the next cluster-wide create (a chart's
        // many cluster roles) costs no read; only while Active, as that cache means.
        let active = serde_json::from_slice::<Value>(&kv.value).is_ok_and(|ns| ns["status"]["phase"] != "Terminating");
        if active {
            self.namespaces.saw_active(&key, kv.mod_revision);
        }
        Ok(Some(Guard { key, mod_revision: kv.mod_revision }))
    }

    /// `cluster`'s LogicalCluster as stored, and whether it is live (not being deleted), if it is
    /// there: what the purge, the bootstrap's guard and a create missing `kube-system` all ask.
    pub async fn logical_cluster(&self, cluster: &str) -> ApiResult<Option<(KeyValue, bool)>> {
        let def = crate::resources::logical_cluster_def();
        let key = keys::object(&self.prefix, def.storage_group(), &def.plural, crate::cluster::ROOT, None, cluster);
        Ok(self.store.get(&key).await?.map(|kv| {
            let live = serde_json::from_slice::<Value>(&kv.value)
                .map_or(true, |lc| lc["metadata"].get("deletionTimestamp").is_none());
            (kv, live)
        }))
    }

    /// Whether a namespace can take new objects, and if so the guard to store them under.
    async fn namespace_state(&self, cluster: &str, ns: &str, fresh: bool) -> ApiResult<Namespace> {
        let key = crate::storage::keys::object(&self.prefix, "core", "namespaces", cluster, None, ns);
        if !fresh {
            if let Some(g) = self.namespaces.guard(&key) {
                return Ok(Namespace::Active(g));
            }
        }
        // A relaxed read first; only a miss pays for a quorum read (the namespace may be brand new). A
        // stale answer is harmless: the store refuses the create if the namespace changed since.
        let relaxed = if fresh { None } else { self.store.get_relaxed(&key).await? };
        let found = match relaxed {
            Some(kv) => Some(kv),
            None => self.store.get(&key).await?,
        };
        let Some(kv) = found else {
            self.namespaces.forget(&key);
            return Ok(Namespace::Missing);
        };
        let ns_def = crate::resources::find("", "v1", "namespaces").expect("namespaces are built in");
        let obj = self.decode(&ns_def, cluster, &kv)?;
        if obj["status"]["phase"] == "Terminating" {
            self.namespaces.forget(&key);
            return Ok(Namespace::Terminating);
        }
        self.namespaces.saw_active(&key, kv.mod_revision);
        Ok(Namespace::Active(Guard { key, mod_revision: kv.mod_revision }))
    }

    /// POST: create an object.
    pub async fn create(&self, ctx: &Ctx<'_>, mut obj: Value, opts: &WriteOptions) -> ApiResult<Written> {
        let def = ctx.def;
        check_type(def, &mut obj)?;
        let warnings = check_schema(def, &mut obj, opts.field_validation)?;
        check_quantities(def, &obj, None)?;
        if let Some(a) = ctx.admit {
            a.admit(None, &obj)?;
        }
        {
            let m = meta::metadata_mut(&mut obj);
            if m.get("resourceVersion").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
                return Err(ApiError::bad_request("resourceVersion should not be set on objects to be created"));
            }
            m.remove("resourceVersion");
        }
        let generate = meta::meta_str(&obj, "name").filter(|n| !n.is_empty()).is_none();
        if generate {
            match meta::meta_str(&obj, "generateName").filter(|g| !g.is_empty()) {
                Some(base) => {
                    let n = meta::generate_name(base);
                    set_meta(&mut obj, "name", json!(n));
                }
                None => {
                    return Err(invalid(
                        def,
                        "",
                        vec![cause(
                            "FieldValueRequired",
                            "metadata.name",
                            "Required value: name or generateName is required",
                        )],
                    ))
                }
            }
        }
        // First, as kube's strategies drop them first: a claim's sources are then mirrored without a
        // reference to another namespace.
        super::gates::drop_disabled(&def.group, &def.kind, &mut obj, None);
        match (def.group.as_str(), def.kind.as_str()) {
            ("", "Pod") => super::defaults::affinity_label_keys(&mut obj),
            ("", "PersistentVolumeClaim") => super::defaults::claim_data_sources(&mut obj),
            ("certificates.k8s.io", "CertificateSigningRequest") => requested_by(&mut obj, ctx.user),
            _ => {}
        }
        if def.namespaced {
            let ns = ctx
                .namespace
                .ok_or_else(|| ApiError::bad_request("a namespace is required to create this resource"))?;
            validate_object(ctx, &obj, None, None)?;
            set_meta(&mut obj, "namespace", json!(ns));
        } else {
            validate_object(ctx, &obj, None, None)?;
            meta::metadata_mut(&mut obj).remove("namespace");
        }
        if def.custom.as_ref().is_some_and(|c| c.terminating) {
            let mut e = ApiError::method_not_allowed("create", &def.plural);
            e.message = "create not allowed while custom resource definition is terminating".into();
            return Err(e);
        }
        if def.group == crate::resources::TENANCY_GROUP && meta::meta_str(&obj, "name") == Some(crate::cluster::ROOT) {
            // root always exists; a LogicalCluster for it could only ever be used to purge it.
            return Err(invalid(
                def,
                crate::cluster::ROOT,
                vec![cause(
                    "FieldValueInvalid",
                    "metadata.name",
                    "Invalid value: \"root\": the root logical cluster is reserved",
                )],
            ));
        }
        let guard = self.namespace_guard(ctx, false).await?;
        apply_defaults(def, &mut obj);
        self.keep_published(def, &mut obj);
        go_shape(def, &mut obj);
        // The shard a new logical cluster's objects will live on, counted as placed until the directory
        // sees it (or given back below if the create fails).
        let placed = if def.group == crate::resources::TENANCY_GROUP {
            crate::tenancy::prepare_new(&mut obj);
            Some(self.place(def, &mut obj)?)
        } else {
            None
        };
        let stored = self.admit_and_store(ctx, obj, opts, guard, generate).await;
        if let (Some(i), Err(_) | Ok(Err(_))) = (placed, &stored) {
            self.shards.unplace(i);
        }
        match stored? {
            Ok(obj) => {
                let obj = self.after_create(ctx, obj).await?;
                Ok(Written { code: 201, body: obj, warnings })
            }
            Err(obj) => Ok(Written { code: 201, body: obj, warnings }),
        }
    }

    /// `status.shard` of a LogicalCluster is where its objects are, which only the move sets: kept
    /// from `current` by every write through the API (the status subresource's too), and set to where
    /// they are by the write that asks for a move (a new `spec.shard`), which must name a shard served
    /// here. The lifecycle controller moves them, then records them there (`tenancy::moving`).
    fn keep_location(&self, def: &ResourceDef, current: &Value, desired: &mut Value) -> ApiResult<()> {
        let at = crate::shard::of(current).unwrap_or(crate::shard::DEFAULT).to_string();
        let (was, now) = (crate::shard::target(current), crate::shard::target(desired).map(str::to_string));
        let changed = was.unwrap_or(crate::shard::DEFAULT) != now.as_deref().unwrap_or(crate::shard::DEFAULT);
        if changed {
            let name = meta::meta_str(current, "name").unwrap_or_default();
            if let Some(Err(m)) = now.as_deref().map(|to| self.shards.served(to)) {
                return Err(invalid(def, name, vec![cause("FieldValueNotSupported", "spec.shard", &m)]));
            }
        }
        if !desired["status"].is_object() {
            desired["status"] = json!({});
        }
        match current["status"].get("shard") {
            Some(s) => desired["status"]["shard"] = s.clone(),
            // Asked to move now: the objects are where `spec.shard` said until this write.
            None if changed => desired["status"]["shard"] = json!(at),
            None => {
                desired["status"].as_object_mut().map(|m| m.remove("shard"));
            }
        }
        Ok(())
    }

    /// Put a new LogicalCluster on the shard it asks for, else on the emptiest (`spec.shard`, set
    /// whenever there is more than one shard to choose from); the shard's index.
    fn place(&self, def: &ResourceDef, obj: &mut Value) -> ApiResult<usize> {
        let asked = crate::shard::target(obj).map(str::to_string);
        let name = meta::meta_str(obj, "name").unwrap_or_default().to_string();
        let at = self
            .shards
            .choose(asked.as_deref())
            .map_err(|m| invalid(def, &name, vec![cause("FieldValueNotSupported", "spec.shard", &m)]))?;
        if self.shards.is_sharded() || asked.is_some() {
            if !obj["spec"].is_object() {
                obj["spec"] = json!({});
            }
            obj["spec"]["shard"] = json!(&*self.shards.names()[at]);
        }
        Ok(at)
    }

    /// The rest of a create, from its admission: the stored object, or a dry run's (`Err`).
    async fn admit_and_store(
        &self,
        ctx: &Ctx<'_>,
        mut obj: Value,
        opts: &WriteOptions,
        guard: Option<Guard>,
        generate: bool,
    ) -> ApiResult<Result<Value, Value>> {
        let def = ctx.def;
        {
            let m = meta::metadata_mut(&mut obj);
            for f in SERVER_META {
                m.remove(*f);
            }
            m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
            m.insert("creationTimestamp".into(), json!(now_rfc3339()));
            if def.status
                || def.scale.is_some()
                || def.custom.is_some()
                || def.group == "apiextensions.k8s.io"
                || def.kind == "Deployment"
            {
                m.insert("generation".into(), json!(1));
            }
        }
        let manager = opts.manager(ctx.user_agent);
        patch::managed::record_update(
            None,
            &mut obj,
            &manager,
            &def.api_version(),
            &now_rfc3339(),
            None,
            &kind_key(def),
        );
        let room = self.admit_footprint(ctx, &obj, None)?;
        // Quota admission, as kube's runs last: dry runs are checked too, and charged nowhere.
        let stored = if self.may_hold_quota(ctx) {
            // In a task of its own, awaited: a request dropped on the way (its client gone) must not
            // leave a quota charged for a create that never happened, or the reverse.
            let owned = super::quota::OwnedCtx::of(ctx);
            let (this, dry_run) = (self.clone(), opts.dry_run);
            let admitted = tokio::spawn(async move {
                let ctx = owned.ctx();
                let name = meta::meta_str(&obj, "name").unwrap_or_default().to_string();
                let charged = this.charge_quota(&ctx, &name, dry_run).await?;
                if dry_run {
                    return Ok(Err(obj));
                }
                match this.store_new(&ctx, obj, guard, generate).await {
                    Ok(obj) => Ok(Ok(obj)),
                    Err(e) => {
                        this.release(&ctx, &charged).await;
                        Err(e)
                    }
                }
            });
            admitted.await.map_err(ApiError::internal)??
        } else if opts.dry_run {
            Err(obj)
        } else {
            Ok(self.store_new(ctx, obj, guard, generate).await?)
        };
        // `Err` is a dry run's object, not stored.
        if let (Some(room), Ok(obj)) = (room, &stored) {
            room.landed(revision_of(obj));
        }
        Ok(stored)
    }

    /// The store step of a create: the object, decorated, once written; a generated name is tried
    /// again if taken, and a namespace that changed meanwhile is checked again.
    async fn store_new(
        &self,
        ctx: &Ctx<'_>,
        mut obj: Value,
        mut guard: Option<Guard>,
        generate: bool,
    ) -> ApiResult<Value> {
        let def = ctx.def;
        let (mut attempts, mut guard_changes) = (0, 0);
        loop {
            let name = meta::meta_str(&obj, "name").unwrap_or_default().to_string();
            let key = self.key(ctx, &name);
            let ready = if def.group == crate::resources::TENANCY_GROUP {
                crate::tenancy::create_ready(self, &mut obj, &key).await.transpose()
            } else {
                None
            };
            let created = match ready {
                Some(made) => made,
                None => self.store.create_guarded(&key, super::encode_for(def, &obj)?, guard.as_ref()).await,
            };
            match created {
                Ok(rev) => {
                    super::decorate(&mut obj, def, ctx.cluster, rev);
                    return Ok(obj);
                }
                Err(StoreError::AlreadyExists) if generate && attempts < 8 => {
                    attempts += 1;
                    let base = meta::meta_str(&obj, "generateName").unwrap_or_default().to_string();
                    set_meta(&mut obj, "name", json!(meta::generate_name(&base)));
                }
                Err(StoreError::GuardChanged) if guard_changes < MAX_RETRIES => {
                    // The namespace changed since it was checked: check it again, then retry.
                    guard_changes += 1;
                    guard = self.namespace_guard(ctx, true).await?;
                }
                Err(StoreError::AlreadyExists) => {
                    let mut e = ApiError::already_exists(&def.plural, &def.group, &name);
                    // As kube-apiserver: say why a name that was just deleted is still taken.
                    let deleting = match self.store.get(&key).await {
                        Ok(Some(kv)) => serde_json::from_slice::<Value>(&kv.value)
                            .is_ok_and(|o| meta::meta_str(&o, "deletionTimestamp").is_some()),
                        _ => false,
                    };
                    if deleting {
                        e.message = format!("object is being deleted: {}", e.message);
                    }
                    return Err(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Side effects controllers would produce at once, on every create path (POST and apply): a
    /// `default` ServiceAccount per namespace; a new logical cluster's namespaces and its Ready status.
    async fn after_create(&self, ctx: &Ctx<'_>, obj: Value) -> ApiResult<Value> {
        self.after_write(ctx, &obj).await;
        if ctx.def.group.is_empty() && ctx.def.kind == "Namespace" {
            let ns = meta::meta_str(&obj, "name").unwrap_or_default();
            if let Err(e) = self.ensure_namespace_defaults(ctx.cluster, ns).await {
                tracing::warn!(error = %e, cluster = ctx.cluster, namespace = ns, "creating a namespace's defaults");
            }
        }
        if ctx.def.group == crate::resources::TENANCY_GROUP {
            return crate::tenancy::initialize(&crate::tenancy::registry_of(self, &obj)?, obj).await;
        }
        Ok(obj)
    }

    /// What follows the removal of `obj`: the published ConfigMap is made again (taking back the place
    /// it gave), or the quotas counting it count one less. In a task of its own, awaited, so that a
    /// request dropped now cannot leave the count high.
    async fn after_delete(&self, ctx: &Ctx<'_>, name: &str, obj: &Value) {
        if !self.may_hold_quota(ctx) && !self.publishes(ctx.def, name) {
            return;
        }
        let (this, owned, name, obj) = (self.clone(), super::quota::OwnedCtx::of(ctx), name.to_string(), obj.clone());
        let done = tokio::spawn(async move {
            let ctx = owned.ctx();
            if !this.republish_deleted(&ctx, &name).await {
                this.released(&ctx, &obj).await;
            }
        });
        let _ = done.await;
    }

    /// What follows an update from `before` to `after`: a pod that finished (or is going) gives its
    /// `pods` count back to the quotas of its namespace, one that runs again takes it. In a task of
    /// its own, awaited, as `after_delete`.
    async fn after_update(&self, ctx: &Ctx<'_>, before: &Value, after: &Value) {
        if !(ctx.def.group.is_empty() && ctx.def.plural == "pods" && self.may_hold_quota(ctx)) {
            return;
        }
        let (this, owned, before, after) =
            (self.clone(), super::quota::OwnedCtx::of(ctx), before.clone(), after.clone());
        let done = tokio::spawn(async move { this.requalified(&owned.ctx(), &before, &after).await });
        let _ = done.await;
    }

    /// Refuse a write past the limits the platform set on this cluster (see `footprint`): a new object
    /// (`sizes` absent), or an update from one stored size to another. An admitted write holds its room
    /// until the watch counts it: the caller says where it landed, or drops the reservation.
    fn admit_footprint(
        &self,
        ctx: &Ctx<'_>,
        obj: &Value,
        sizes: Option<(usize, usize)>,
    ) -> ApiResult<Option<super::footprint::Reservation>> {
        if self.footprint.limits(ctx.cluster).is_none() {
            return Ok(None);
        }
        let signed = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let name = meta::meta_str(obj, "name").unwrap_or_default();
        match sizes {
            Some((before, after)) => {
                self.footprint.admit(ctx.cluster, ctx.def, name, false, signed(after) - signed(before))
            }
            None => {
                let size = self.key(ctx, name).len() + super::encode_for(ctx.def, obj)?.len();
                self.footprint.admit(ctx.cluster, ctx.def, name, true, signed(size))
            }
        }
    }

    /// What a controller does at once after a write: a ResourceQuota written is counted afresh.
    async fn after_write(&self, ctx: &Ctx<'_>, obj: &Value) {
        let (Some(ns), Some(name)) = (ctx.namespace, meta::meta_str(obj, "name")) else { return };
        if ctx.def.group.is_empty() && ctx.def.plural == "resourcequotas" {
            self.quota_index.wrote(ctx.cluster, ns);
            if let Err(e) = self.recount_quota(ctx.cluster, ns, name).await {
                tracing::warn!(error = %e, cluster = ctx.cluster, namespace = ns, quota = name, "counting a quota's usage");
            }
        }
    }

    /// Create what controllers put in every namespace, if it is missing: the `default` ServiceAccount
    /// and, when the server's CA is known, the `kube-root-ca.crt` ConfigMap kube's publisher keeps.
    pub async fn ensure_namespace_defaults(&self, cluster: &str, ns: &str) -> ApiResult<()> {
        for (plural, name, obj) in self.namespace_defaults(ns) {
            self.create_in_namespace(cluster, ns, plural, name, &obj).await?;
        }
        Ok(())
    }

    /// What every namespace holds from its start, as kube's controllers make it at once: its `default`
    /// ServiceAccount and, when this registry publishes a CA, `kube-root-ca.crt` (plural, name, object).
    pub fn namespace_defaults(&self, ns: &str) -> Vec<(&'static str, &'static str, Value)> {
        let meta = |name: &str| json!({"name": name, "namespace": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now_rfc3339()});
        let mut objects = vec![(
            "serviceaccounts",
            "default",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta("default")}),
        )];
        if let Some(cm) = self.root_ca_configmap(ns) {
            objects.push(("configmaps", ROOT_CA_CONFIGMAP, cm));
        }
        objects
    }

    /// Create a core object in a namespace unless it is there; true when this made it. Only into the
    /// namespace while it is there and not terminating, checked in the create's own store step as every
    /// create is: a DELETE racing a new namespace must not leave this behind.
    pub(super) async fn create_in_namespace(
        &self,
        cluster: &str,
        ns: &str,
        plural: &str,
        name: &str,
        obj: &Value,
    ) -> ApiResult<bool> {
        let key = crate::storage::keys::object(&self.prefix, "core", plural, cluster, Some(ns), name);
        for attempt in 0..MAX_RETRIES {
            let Namespace::Active(guard) = self.namespace_state(cluster, ns, attempt > 0).await? else {
                return Ok(false);
            };
            match self.store.create_guarded(&key, super::encode(obj), Some(&guard)).await {
                Ok(_) => return Ok(true),
                Err(StoreError::AlreadyExists) => return Ok(false),
                Err(StoreError::GuardChanged) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(false)
    }

    /// Read-modify-write with retries. `change` gets the current object and returns the desired one, or
    /// `None` to leave it as is. A conflict caused by the caller's own precondition is returned by
    /// `change` itself.
    async fn guaranteed_update<F>(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        dry_run: bool,
        mut change: F,
    ) -> ApiResult<(Value, bool)>
    where
        F: FnMut(&Value) -> ApiResult<Option<Value>>,
    {
        for _ in 0..MAX_RETRIES {
            let (kv, current) = self.current(ctx, name).await?;
            let Some(mut desired) = change(&current)? else {
                return Ok((current, false));
            };
            if same_object(&current, &desired) {
                return Ok((current, false));
            }
            if dry_run {
                return Ok((desired, true));
            }
            // Finalizers all gone from an object being deleted: the update is the delete. Not for
            // namespaces, whose finalizers live in spec and which only their cleanup removes.
            let is_namespace = ctx.def.group.is_empty() && ctx.def.kind == "Namespace";
            if !is_namespace
                && meta::meta_str(&desired, "deletionTimestamp").is_some()
                && meta::finalizers(&desired).is_empty()
            {
                match self.store.delete(&kv.key, Some(kv.mod_revision)).await {
                    Ok((rev, _)) => {
                        super::decorate(&mut desired, ctx.def, ctx.cluster, rev);
                        self.after_delete(ctx, name, &desired).await;
                        return Ok((desired, true));
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(StoreError::NotFound) => {
                        return Err(ApiError::not_found(&ctx.def.plural, &ctx.def.group, name))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
            let bytes = super::encode_for(ctx.def, &desired)?;
            let room = self.admit_footprint(ctx, &desired, Some((kv.value.len(), bytes.len())))?;
            match self.store.update(&kv.key, bytes, kv.mod_revision).await {
                Ok(rev) => {
                    if let Some(room) = room {
                        room.landed(rev);
                    }
                    super::decorate(&mut desired, ctx.def, ctx.cluster, rev);
                    self.after_update(ctx, &current, &desired).await;
                    return Ok((desired, true));
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&ctx.def.plural, &ctx.def.group, name)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(&ctx.def.plural, &ctx.def.group, name, "too many concurrent updates; try again"))
    }

    /// Turn a client's desired object into the stored one, given the current object.
    fn prepare_update(
        &self,
        ctx: &Ctx<'_>,
        current: &Value,
        mut desired: Value,
        subresource: Option<&str>,
        manager: &str,
    ) -> ApiResult<Value> {
        let def = ctx.def;
        desired = self.keep_server_owned(ctx, current, desired, subresource)?;
        settle_update(ctx, current, &mut desired, subresource)?;
        // A binding is the scheduler's, recorded in no field manager's name, as in kube.
        if !same_object(current, &desired) && subresource != Some("binding") {
            patch::managed::record_update(
                Some(current),
                &mut desired,
                manager,
                &def.api_version(),
                &now_rfc3339(),
                subresource,
                &kind_key(def),
            );
        }
        Ok(desired)
    }

    /// What an update, a patch or an apply may not change, taken from the current object: the status
    /// through the main resource, the main resource through a subresource, what is published, a
    /// CertificateSigningRequest's request, a LogicalCluster's shard; then admission.
    fn keep_server_owned(
        &self,
        ctx: &Ctx<'_>,
        current: &Value,
        mut desired: Value,
        subresource: Option<&str>,
    ) -> ApiResult<Value> {
        let def = ctx.def;
        if let Some(next) = subresource.and_then(|s| through_subresource(s, current, &desired)) {
            desired = next;
        } else if def.status {
            match current.get("status") {
                Some(s) => desired["status"] = s.clone(),
                None => {
                    desired.as_object_mut().map(|m| m.remove("status"));
                }
            }
            super::convert::keep_stored_status(def, current, &mut desired);
            // A request is what its requester sent: an update of the object changes its metadata only.
            if def.group == "certificates.k8s.io" && def.kind == "CertificateSigningRequest" {
                desired["spec"] = current["spec"].clone();
            }
        }
        check_quantities(def, &desired, Some(current))?;
        if let Some(a) = ctx.admit {
            a.admit(Some(current), &desired)?;
        }
        self.keep_published(def, &mut desired);
        if def.group == crate::resources::TENANCY_GROUP {
            // Set by placement, as kube sets a Service's clusterIP: a replace that leaves it out keeps it.
            if let (Some(shard), None) = (crate::shard::target(current), crate::shard::target(&desired)) {
                if desired["spec"].is_object() || desired.get("spec").is_none_or(Value::is_null) {
                    desired["spec"]["shard"] = json!(shard);
                }
            }
            self.keep_location(def, current, &mut desired)?;
        }
        Ok(desired)
    }

    /// PUT: replace an object (or its status).
    pub async fn update(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        mut obj: Value,
        opts: &WriteOptions,
        subresource: Option<&str>,
    ) -> ApiResult<Written> {
        let def = ctx.def;
        check_type(def, &mut obj)?;
        let warnings = check_schema(def, &mut obj, opts.field_validation)?;
        match meta::meta_str(&obj, "name") {
            Some(n) if n != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )))
            }
            _ => set_meta(&mut obj, "name", json!(name)),
        }
        if def.namespaced {
            validate_meta(ctx, &obj)?;
        }
        let wanted_rv = meta::meta_str(&obj, "resourceVersion").filter(|s| !s.is_empty()).map(str::to_string);
        let wanted_uid = meta::meta_str(&obj, "uid").filter(|s| !s.is_empty()).map(str::to_string);
        let manager = opts.manager(ctx.user_agent);
        let (body, changed) = self
            .guaranteed_update(ctx, name, opts.dry_run, |current| {
                if let Some(rv) = &wanted_rv {
                    if meta::meta_str(current, "resourceVersion") != Some(rv.as_str()) {
                        return Err(ApiError::stale(&def.plural, &def.group, name));
                    }
                }
                let have = meta::meta_str(current, "uid").unwrap_or_default();
                if let Some(want) = wanted_uid.as_deref().filter(|u| *u != have) {
                    return Err(ApiError::conflict(
                        &def.plural,
                        &def.group,
                        name,
                        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {have}"),
                    ));
                }
                self.prepare_update(ctx, current, obj.clone(), subresource, &manager).map(Some)
            })
            .await?;
        if changed && !opts.dry_run {
            self.after_write(ctx, &body).await;
        }
        Ok(Written { code: 200, body, warnings })
    }

    /// PATCH: apply a patch of the given type (or server-side apply) to an object or its status.
    pub async fn patch(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        opts: &WriteOptions,
        subresource: Option<&str>,
    ) -> ApiResult<Written> {
        let def = ctx.def;
        let decoded = match patch_type {
            PatchType::Apply => crate::codec::yaml_or_json(body)?,
            _ => crate::codec::json(body).map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?,
        };
        // Apply keeps its configuration for the whole update; the other patch types take theirs on the
        // first attempt (a patch of thousands of list items is as large as the object it makes) and
        // decode the body again only if the store's compare-and-swap makes them retry.
        let (patch_doc, mut fresh) = match patch_type {
            PatchType::Apply => (decoded.value, None),
            _ => (Value::Null, Some(decoded.value)),
        };
        let mut duplicate_warnings = Vec::new();
        if !decoded.duplicates.is_empty() {
            // As kube-apiserver's patch handler words its strict decoding errors.
            let prefix = if patch_type == PatchType::Json { "json patch " } else { "" };
            let each: Vec<String> =
                decoded.duplicates.iter().map(|d| format!("{prefix}duplicate field \"{d}\"")).collect();
            match (opts.field_validation, patch_type) {
                (FieldValidation::Strict, PatchType::Apply) => {
                    return Err(ApiError::bad_request(format!("error strict decoding YAML: {}", each.join(", "))));
                }
                (FieldValidation::Strict, _) => {
                    let detail = format!(
                        "Invalid value: {}: strict decoding error: {}",
                        serde_json::to_string(&String::from_utf8_lossy(body)).unwrap_or_default(),
                        each.join(", ")
                    );
                    return Err(ApiError::invalid("", "", "", vec![cause("FieldValueInvalid", "patch", detail)]));
                }
                (FieldValidation::Warn, _) => duplicate_warnings = each,
                (FieldValidation::Ignore, _) => {}
            }
        }
        if opts.force.is_some() && patch_type != PatchType::Apply {
            return Err(ApiError::invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                vec![cause("FieldValueForbidden", "force", "Forbidden: may not be specified for non-apply patch")],
            ));
        }
        if patch_type == PatchType::Apply && opts.field_manager.is_none() {
            return Err(ApiError::invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                vec![cause("FieldValueRequired", "fieldManager", "Required value: is required for apply patch")],
            ));
        }
        let manager = opts.manager(ctx.user_agent);
        if patch_type == PatchType::Apply {
            let mut applied = patch_doc.clone();
            check_type(def, &mut applied)?;
            if let Some(n) = meta::meta_str(&applied, "name") {
                if n != name {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
            }
            let key = self.key(ctx, name);
            if self.store.get(&key).await?.is_none() && subresource.is_none() {
                let now = now_rfc3339();
                let mut obj = patch::managed::apply(patch::managed::ApplyRequest {
                    live: None,
                    applied: &applied,
                    manager: &manager,
                    force: opts.force.unwrap_or(false),
                    api_version: &def.api_version(),
                    kind_key: &kind_key(def),
                    now: &now,
                    subresource: None,
                })
                .map_err(|e| patch_error(def, name, e))?;
                set_meta(&mut obj, "name", json!(name));
                // Create path: creation records its own managed fields, so keep the apply entry.
                let managed = meta::metadata(&obj).and_then(|m| m.get("managedFields")).cloned();
                let mut w = self
                    .create(ctx, obj, &WriteOptions { field_manager: Some(manager.clone()), ..opts.clone() })
                    .await?;
                if let (Some(mf), false) = (managed, opts.dry_run) {
                    // Replace the Update entry create recorded with the Apply entry.
                    let mut with_apply = w.body.clone();
                    set_meta(&mut with_apply, "managedFields", mf);
                    let kv_rev = meta::meta_str(&w.body, "resourceVersion").and_then(|r| r.parse().ok()).unwrap_or(0);
                    if let Ok(rev) = self.store.update(&key, super::encode_for(def, &with_apply)?, kv_rev).await {
                        super::decorate(&mut with_apply, def, ctx.cluster, rev);
                        w.body = with_apply;
                    }
                }
                w.warnings.splice(0..0, duplicate_warnings);
                return Ok(w);
            }
        }
        let mut warnings = Vec::new();
        let (body, changed) = self
            .guaranteed_update(ctx, name, opts.dry_run, |current| {
                let base = if subresource == Some("scale") { scale_of(def, current)? } else { current.clone() };
                let mut doc = || match fresh.take() {
                    Some(doc) => Ok(doc),
                    None => crate::codec::json(body)
                        .map(|d| d.value)
                        .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}"))),
                };
                let mut patched = match patch_type {
                    PatchType::Json => patch::json_patch(&base, doc()?),
                    PatchType::Merge => patch::merge_patch(&base, &doc()?),
                    PatchType::StrategicMerge => patch::strategic_merge_patch(&base, doc()?, &kind_key(def)),
                    PatchType::Apply => patch::managed::apply(patch::managed::ApplyRequest {
                        live: Some(&base),
                        applied: &patch_doc,
                        manager: &manager,
                        force: opts.force.unwrap_or(false),
                        api_version: &def.api_version(),
                        kind_key: &kind_key(def),
                        now: &now_rfc3339(),
                        subresource,
                    }),
                }
                .map_err(|e| patch_error(def, name, e))?;
                if subresource == Some("scale") {
                    let desired = apply_scale(def, current, &patched)?;
                    return self.prepare_update(ctx, current, desired, subresource, &manager).map(Some);
                }
                if !patched.is_object() {
                    return Err(ApiError::bad_request("the patch did not produce an object"));
                }
                // A resourceVersion in the patch is a precondition.
                let rv = meta::meta_str(&patched, "resourceVersion").map(str::to_string);
                if rv.as_deref().is_some_and(|rv| Some(rv) != meta::meta_str(current, "resourceVersion")) {
                    return Err(ApiError::stale(&def.plural, &def.group, name));
                }
                check_type(def, &mut patched)?;
                warnings = check_schema(def, &mut patched, opts.field_validation)?;
                // As kube-apiserver: a patch may not move an object to another namespace, nor give it another uid.
                let patched_ns = meta::meta_str(&patched, "namespace").filter(|n| !n.is_empty());
                if def.namespaced && patched_ns.is_some_and(|n| Some(n) != ctx.namespace) {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                if let Some(uid) =
                    meta::meta_str(&patched, "uid").filter(|u| Some(*u) != meta::meta_str(current, "uid"))
                {
                    return Err(invalid(
                        def,
                        name,
                        vec![cause(
                            "FieldValueInvalid",
                            "metadata.uid",
                            format!("Invalid value: {uid:?}: field is immutable"),
                        )],
                    ));
                }
                if meta::meta_str(&patched, "name") != Some(name) {
                    return Err(ApiError::bad_request("metadata.name cannot be changed by a patch"));
                }
                let desired = if patch_type == PatchType::Apply {
                    // apply() already recorded managed fields; keep what the server owns.
                    let mut d = self.keep_server_owned(ctx, current, patched, subresource)?;
                    settle_update(ctx, current, &mut d, subresource)?;
                    d
                } else {
                    self.prepare_update(ctx, current, patched, subresource, &manager)?
                };
                Ok(Some(desired))
            })
            .await?;
        if changed && !opts.dry_run {
            self.after_write(ctx, &body).await;
        }
        let body = if subresource == Some("scale") { scale_of(def, &body)? } else { body };
        duplicate_warnings.append(&mut warnings);
        Ok(Written { code: 200, body, warnings: duplicate_warnings })
    }

    /// PUT on `/scale`.
    pub async fn update_scale(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        scale: Value,
        opts: &WriteOptions,
    ) -> ApiResult<Written> {
        let def = ctx.def;
        let manager = opts.manager(ctx.user_agent);
        let wanted_rv = meta::meta_str(&scale, "resourceVersion").filter(|s| !s.is_empty()).map(str::to_string);
        let (obj, _) = self
            .guaranteed_update(ctx, name, opts.dry_run, |current| {
                if let Some(rv) = &wanted_rv {
                    if meta::meta_str(current, "resourceVersion") != Some(rv.as_str()) {
                        return Err(ApiError::stale(&def.plural, &def.group, name));
                    }
                }
                let desired = apply_scale(def, current, &scale)?;
                self.prepare_update(ctx, current, desired, Some("scale"), &manager).map(Some)
            })
            .await?;
        Ok(Written { code: 200, body: scale_of(def, &obj)?, warnings: vec![] })
    }

    /// DELETE of one object.
    pub async fn delete(&self, ctx: &Ctx<'_>, name: &str, opts: &DeleteOptions) -> ApiResult<Written> {
        let def = ctx.def;
        for _ in 0..MAX_RETRIES {
            let (kv, current) = self.current(ctx, name).await?;
            let uid = meta::meta_str(&current, "uid").unwrap_or_default().to_string();
            if let Some(want) = &opts.uid {
                if *want != uid {
                    return Err(ApiError::conflict(
                        &def.plural,
                        &def.group,
                        name,
                        &format!("Precondition failed: UID in precondition: {want}, UID in object meta: {uid}"),
                    ));
                }
            }
            if let Some(want) = &opts.resource_version {
                let have = kv.mod_revision.to_string();
                if *want != have {
                    return Err(ApiError::conflict(
                        &def.plural,
                        &def.group,
                        name,
                        &format!("Precondition failed: ResourceVersion in precondition: {want}, ResourceVersion in object meta: {have}"),
                    ));
                }
            }
            let is_namespace = def.group.is_empty() && def.kind == "Namespace";
            if is_namespace && crate::tenancy::UNDELETABLE_NAMESPACES.contains(&name) {
                let mut e = ApiError::forbidden(format!(
                    "namespaces \"{name}\" is forbidden: this namespace may not be deleted"
                ));
                e.name = Some(name.to_string());
                e.kind = Some("namespaces".into());
                return Err(e);
            }
            // What the garbage collector is asked to do (namespaces empty themselves instead).
            let collect =
                if is_namespace { None } else { super::propagation::finalizers(def, &current, opts.propagation) };
            let has_finalizers = match &collect {
                Some(f) => !f.is_empty(),
                None => !meta::finalizers(&current).is_empty(),
            };
            if is_namespace || has_finalizers {
                // Deferred delete: mark it, return the object; it goes when its finalizers are gone.
                let deleting = meta::meta_str(&current, "deletionTimestamp").is_some();
                if deleting && collect.is_none() {
                    if is_namespace && !opts.dry_run {
                        // A repeated delete restarts a cleanup that stopped (one still running goes on).
                        self.spawn_namespace_cleanup(ctx.cluster.to_string(), name.to_string());
                    }
                    return Ok(Written { code: 200, body: current, warnings: vec![] });
                }
                let mut next = current.clone();
                if let Some(f) = collect {
                    // As kube: a second delete may change how dependents go (orphan, then foreground).
                    meta::metadata_mut(&mut next).insert("finalizers".into(), json!(f));
                }
                if !deleting {
                    mark_deleted(&mut next);
                    if is_namespace {
                        next["status"] = json!({"phase": "Terminating"});
                    }
                    if (def.group.as_str(), def.kind.as_str()) == ("apiextensions.k8s.io", "CustomResourceDefinition") {
                        crate::crd::mark_terminating(&mut next);
                    }
                    if def.group == crate::resources::TENANCY_GROUP {
                        // The purge itself is started by the lifecycle controller, which sees this update.
                        next["status"] = crate::tenancy::terminating_status(&current);
                    }
                }
                if opts.dry_run {
                    return Ok(Written { code: 200, body: next, warnings: vec![] });
                }
                match self.store.update(&kv.key, super::encode_for(def, &next)?, kv.mod_revision).await {
                    Ok(rev) => {
                        super::decorate(&mut next, def, ctx.cluster, rev);
                        // A pod marked for deletion with no grace holds nothing from now on.
                        self.after_update(ctx, &current, &next).await;
                        if is_namespace {
                            self.spawn_namespace_cleanup(ctx.cluster.to_string(), name.to_string());
                        }
                        return Ok(Written { code: 200, body: next, warnings: vec![] });
                    }
                    Err(StoreError::Conflict { .. }) => continue,
                    Err(e) => return Err(e.into()),
                }
            }
            let answer = || match returns_deleted_object(def) {
                true => current.clone(),
                false => success_status(&def.plural, &def.group, name, Some(&uid)),
            };
            if opts.dry_run {
                return Ok(Written { code: 200, body: answer(), warnings: vec![] });
            }
            match self.store.delete(&kv.key, Some(kv.mod_revision)).await {
                Ok(_) => {
                    self.after_delete(ctx, name, &current).await;
                    return Ok(Written { code: 200, body: answer(), warnings: vec![] });
                }
                Err(StoreError::Conflict { .. }) => continue,
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&def.plural, &def.group, name)),
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(&def.plural, &def.group, name, "too many concurrent updates; try again"))
    }

    /// DELETE on a collection: delete every matching object, return the list of what was deleted.
    pub async fn delete_collection(
        &self,
        ctx: &Ctx<'_>,
        list: &ListOptions,
        opts: &DeleteOptions,
        charge: &mut (dyn FnMut(usize) -> ApiResult<()> + Send),
    ) -> ApiResult<Written> {
        let def = ctx.def;
        let mut all = list.clone();
        all.limit = 0;
        all.continue_token = None;
        let found = self.list_charged(def, Some(ctx.cluster), ctx.namespace, &all, charge).await?;
        let mut deleted = Vec::new();
        for obj in found.items {
            let name = meta::meta_str(&obj, "name").unwrap_or_default().to_string();
            match self.delete(ctx, &name, opts).await {
                Ok(_) => deleted.push(obj),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(Written {
            code: 200,
            body: json!({"apiVersion": def.api_version(), "kind": def.list_kind(), "metadata": {"resourceVersion": found.revision.to_string()}, "items": deleted}),
            warnings: vec![],
        })
    }

    /// Empty a terminating namespace in the background, then remove it (the namespace controller's job).
    pub fn spawn_namespace_cleanup(&self, cluster: String, namespace: String) {
        // The running one sees the namespace still terminating and carries on.
        let Some(claim) = self.cleaning.claim(format!("{cluster}/{namespace}")) else { return };
        let this = self.clone();
        tokio::spawn(async move {
            let _claim = claim;
            if let Err(e) = this.finalize_namespace(&cluster, &namespace).await {
                tracing::warn!(error = %e, cluster = %cluster, namespace = %namespace, "namespace cleanup failed");
            }
        });
    }

    /// Delete every key under `prefixes`, [`SWEEP_PAGE`] keys at a time, in passes until one finds nothing,
    /// so keys written by requests that raced the deletion go too. Shared by namespace cleanup, CRD
    /// cleanup and the purge of a deleted logical cluster.
    ///
    /// `keep_going` is asked after each page is read and before any of it is deleted. Deletes are
    /// compare-and-swap on the revision the page was read at, so a `true` answered after the read covers
    /// every key deleted for that page: a key written later (say, by a new cluster of the same name
    /// created once the answer turned) has a newer revision and is left alone.
    pub async fn delete_prefixes<F, Fut>(
        &self,
        prefixes: &[String],
        finalizers: Finalizers,
        keep_going: F,
    ) -> ApiResult<Sweep>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<bool>>,
    {
        self.sweep_prefixes(prefixes, None, finalizers, keep_going).await
    }

    /// [`Registry::delete_prefixes`] for a whole cluster, whose custom resources' prefixes come from
    /// the CRDs found under `builtin` (which holds the CRDs' prefix) in each pass's first read, and go
    /// first, ahead of their CRDs: a purge cut short and resumed must still find the CRDs. A prefix
    /// found once is swept in every later pass, its CRD gone or not: a custom resource rewritten
    /// while its pass deleted the CRD is found there. Reading the CRDs with the other first pages
    /// spares the purge a read of its own per pass, a quarter of the reads a deleted empty cluster
    /// costs its store. [`Remaining::per_prefix`] counts the custom prefixes first.
    pub async fn delete_cluster_prefixes<F, Fut>(
        &self,
        cluster: &str,
        builtin: &[String],
        keep_going: F,
    ) -> ApiResult<Sweep>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<bool>>,
    {
        self.sweep_prefixes(builtin, Some(cluster), Finalizers::Ignore, keep_going).await
    }

    /// The sweep behind both: `custom_of` names the cluster whose custom resources are found as
    /// [`Registry::delete_cluster_prefixes`] says.
    async fn sweep_prefixes<F, Fut>(
        &self,
        given: &[String],
        custom_of: Option<&str>,
        finalizers: Finalizers,
        mut keep_going: F,
    ) -> ApiResult<Sweep>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = ApiResult<bool>>,
    {
        use futures::StreamExt;
        let page_of = |prefix: &String, start: Option<String>| crate::storage::RangeRequest {
            prefix: prefix.clone(),
            start,
            limit: SWEEP_PAGE,
            ..Default::default()
        };
        // Custom resources' prefixes found so far (see `delete_cluster_prefixes`), in the order found.
        let mut custom: Vec<String> = Vec::new();
        // A tenant may define thousands of CRDs: membership is a lookup, not a scan.
        let mut known = std::collections::HashSet::new();
        let crds = custom_of.map(|cluster| crate::crd::definitions(self, cluster));
        for _pass in 0..SWEEP_PASSES {
            // Every prefix's first page in one round trip (a cluster's purge reads some sixty, most of
            // them empty), checked once; later pages one by one, each checked.
            let mut firsts = self.store.ranges(given.iter().map(|p| page_of(p, None)).collect()).await?;
            let mut prefixes = std::borrow::Cow::Borrowed(given);
            if let (Some(cluster), Some(crds)) = (custom_of, &crds) {
                let defined: Vec<String> = match given.iter().zip(&firsts).find(|(p, _)| *p == crds) {
                    Some((_, page)) if !page.more => {
                        crate::crd::prefixes_defined(self, cluster, None, &page.kvs).collect()
                    }
                    // More CRDs than a page: read them all.
                    _ => crate::crd::custom_prefixes(self, cluster, None).await?,
                };
                for p in defined {
                    if known.insert(p.clone()) {
                        custom.push(p);
                    }
                }
                if !custom.is_empty() {
                    let pages = self.store.ranges(custom.iter().map(|p| page_of(p, None)).collect()).await?;
                    firsts.splice(0..0, pages);
                    prefixes = std::borrow::Cow::Owned(custom.iter().chain(given).cloned().collect());
                }
            }
            let mut found = 0usize;
            let mut held = Remaining { per_prefix: vec![0; prefixes.len()], ..Default::default() };
            if firsts.iter().any(|p| !p.kvs.is_empty()) && !keep_going().await? {
                return Ok(Sweep::Stopped);
            }
            if finalizers == Finalizers::Ignore {
                // A small cluster's keys all go in one step; what a page leaves (a prefix of more than
                // a page) the next pass finds.
                let all: Vec<(String, crate::storage::Revision)> =
                    firsts.iter().flat_map(|p| p.kvs.iter().map(|kv| (kv.key.clone(), kv.mod_revision))).collect();
                if !all.is_empty() && self.store.delete_all(&all).await.unwrap_or(false) {
                    if firsts.iter().all(|p| !p.more) {
                        return Ok(Sweep::Empty);
                    }
                    found += all.len();
                    firsts.iter_mut().for_each(|p| p.kvs.clear());
                }
            }
            for ((i, prefix), first) in prefixes.iter().enumerate().zip(firsts) {
                let (mut start, mut ready) = (None, Some(first));
                loop {
                    let later = ready.is_none();
                    let page = match ready.take() {
                        Some(p) => p,
                        None => self.store.range(page_of(prefix, start.take())).await?,
                    };
                    if page.kvs.is_empty() {
                        break;
                    }
                    // Held objects stay, so the next page starts after this one rather than at the prefix.
                    let next = page.next_start();
                    if later && !keep_going().await? {
                        return Ok(Sweep::Stopped);
                    }
                    found += page.kvs.len();
                    // Owned keys and store handle: a stream of futures borrowing from the page is not
                    // `Send` for every lifetime, which spawned callers need.
                    let store = self.store.clone();
                    let mut writes = futures::stream::iter(page.kvs)
                        .map(move |kv| {
                            let store = store.clone();
                            async move { sweep_one(&*store, kv, finalizers).await }
                        })
                        .buffer_unordered(SWEEP_CONCURRENCY);
                    while let Some(res) = writes.next().await {
                        match res {
                            Ok(Some(finalizers)) => {
                                held.per_prefix[i] += 1;
                                for f in finalizers {
                                    *held.finalizers.entry(f).or_default() += 1;
                                }
                            }
                            // Gone already, or rewritten since the read: the next read sees it again.
                            Ok(None) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    match next {
                        Some(n) => start = Some(n),
                        None => break,
                    }
                }
            }
            if found == 0 {
                return Ok(Sweep::Empty);
            }
            if found == held.per_prefix.iter().sum::<usize>() {
                return Ok(Sweep::Held(held));
            }
        }
        Ok(Sweep::KeysLeft)
    }

    /// Remove `finalizer` from a cluster-scoped object being deleted; the object goes with its last
    /// finalizer. Returns whether the finalizer was released here (false: not deleting, or not there).
    pub async fn remove_finalizer(
        &self,
        def: &ResourceDef,
        cluster: &str,
        name: &str,
        finalizer: &str,
    ) -> ApiResult<bool> {
        self.remove_finalizer_from(def, cluster, name, finalizer, None).await
    }

    /// `remove_finalizer`, trying first from `known`, the object as the caller last read it: a read
    /// saved when nothing changed it since (a purge's release, after the read that let it delete),
    /// and only a lost compare when something did.
    pub async fn remove_finalizer_from(
        &self,
        def: &ResourceDef,
        cluster: &str,
        name: &str,
        finalizer: &str,
        mut known: Option<KeyValue>,
    ) -> ApiResult<bool> {
        let key = keys::object(&self.prefix, def.storage_group(), &def.plural, cluster, None, name);
        for _ in 0..MAX_RETRIES {
            let kv = match known.take().filter(|kv| kv.key == key) {
                Some(kv) => kv,
                None => match self.store.get(&key).await? {
                    Some(kv) => kv,
                    None => return Ok(false),
                },
            };
            let mut obj = self.decode(def, cluster, &kv)?;
            let finalizers = meta::finalizers(&obj);
            if meta::meta_str(&obj, "deletionTimestamp").is_none() || !finalizers.iter().any(|f| f == finalizer) {
                return Ok(false);
            }
            let rest: Vec<String> = finalizers.into_iter().filter(|f| f != finalizer).collect();
            let res = if rest.is_empty() {
                self.store.delete(&key, Some(kv.mod_revision)).await.map(|_| ())
            } else {
                meta::metadata_mut(&mut obj).insert("finalizers".into(), json!(rest));
                self.store.update(&key, super::encode_for(def, &obj)?, kv.mod_revision).await.map(|_| ())
            };
            match res {
                Ok(()) | Err(StoreError::NotFound) => return Ok(true),
                Err(StoreError::Conflict { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ApiError::conflict(&def.plural, &def.group, name, "too many concurrent updates; try again"))
    }

    /// Delete everything in a namespace, then the namespace itself. Passes repeat until one finds
    /// nothing, so objects created by requests that raced the termination are removed too.
    pub async fn finalize_namespace(&self, cluster: &str, namespace: &str) -> ApiResult<()> {
        let key = crate::storage::keys::object(&self.prefix, "core", "namespaces", cluster, None, namespace);
        // Only while the namespace is still the terminating one: another replica's cleanup of the same
        // namespace may outlive this one, and it must not empty a namespace re-created since.
        let terminating = |kv: &KeyValue| {
            serde_json::from_slice::<Value>(&kv.value).is_ok_and(|o| meta::meta_str(&o, "deletionTimestamp").is_some())
        };
        let store = self.store.clone();
        // A turn (see `sweeps`) for each page of a sweep: given back and taken again before the next
        // page's deletes, so that other clusters' sweeps go between pages, and never held in a pause.
        let turn: std::sync::Mutex<Option<crate::turns::Turn>> = Default::default();
        let hold = |t: Option<crate::turns::Turn>| *turn.lock().unwrap_or_else(|e| e.into_inner()) = t;
        let still = || {
            let (store, key, hold) = (store.clone(), key.clone(), &hold);
            async move {
                hold(None);
                hold(Some(self.sweeps.take(cluster).await));
                Ok(store.get(&key).await?.is_some_and(|kv| terminating(&kv)))
            }
        };
        // Objects with finalizers hold the namespace in Terminating until their owners release them, and
        // objects still being updated hold it until a pass removes them, as kube's namespace controller
        // retries until the content is gone (a restart resumes the wait: see `resume_namespace_deletions`).
        let mut pause = HELD_PAUSE;
        let mut closing = self.closing.subscribe();
        loop {
            // The prefixes read in a turn too: a task waiting for one holds no more than its names.
            hold(Some(self.sweeps.take(cluster).await));
            // Custom resources too, as the namespace controller deletes them: their prefixes come from
            // the cluster's CRDs in the store.
            let mut prefixes = crate::crd::custom_prefixes(self, cluster, Some(namespace)).await?;
            prefixes.extend(
                crate::resources::for_cluster(cluster)
                    .filter(|d| d.namespaced && !d.is_virtual() && !super::converts(d))
                    .map(|d| self.collection(d, Some(cluster), Some(namespace))),
            );
            prefixes.extend(super::legacy_prefixes(self, cluster, Some(namespace)));
            let swept = self.delete_prefixes(&prefixes, Finalizers::Honor, &still).await;
            hold(None);
            match swept? {
                Sweep::Stopped => return Ok(()),
                Sweep::Empty => break,
                Sweep::Held(remaining) => {
                    tracing::debug!(cluster, namespace, ?remaining, "namespace waits for finalizers");
                    let resources: Vec<String> = prefixes.iter().map(|p| self.group_resource(p)).collect();
                    // Only a report: the wait goes on whether or not it could be written.
                    if let Err(e) = self.report_remaining(&key, &resources, &remaining).await {
                        tracing::warn!(cluster, namespace, error = %e, "could not say what holds the namespace");
                    }
                }
                // Objects were updated under every pass (creates are refused now, so these are writes
                // to objects already there): removing the namespace would orphan them, so go again.
                Sweep::KeysLeft => tracing::debug!(cluster, namespace, "namespace content still changing"),
            }
            // A restart picks the wait up again (`resume_namespace_deletions`).
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = closing.wait_for(|c| *c) => return Ok(()),
            }
            pause = (pause * 2).min(HELD_PAUSE_MAX);
        }
        let Some(kv) = self.store.get(&key).await? else { return Ok(()) };
        if !terminating(&kv) {
            return Ok(());
        }
        match self.store.delete(&key, Some(kv.mod_revision)).await {
            Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// `configmaps`, or `deployments.apps`: how kube names a resource in namespace conditions, from one
    /// of this registry's collection prefixes (`<prefix>/<group or core>/<plural>/...`).
    fn group_resource(&self, collection: &str) -> String {
        let mut parts =
            collection.strip_prefix(self.prefix.as_str()).unwrap_or(collection).trim_start_matches('/').split('/');
        match (parts.next(), parts.next()) {
            (Some("core"), Some(plural)) => plural.to_string(),
            (Some(group), Some(plural)) => format!("{plural}.{group}"),
            _ => collection.to_string(),
        }
    }

    /// Say on a terminating namespace what holds it, in the conditions kube's namespace controller
    /// sets: they are what `kubectl describe namespace` shows a team looking for the object to release.
    /// Written only when they change, so the backoff rounds do not churn the namespace's watchers.
    async fn report_remaining(&self, key: &str, resources: &[String], remaining: &Remaining) -> ApiResult<()> {
        let Some(kv) = self.store.get(key).await? else { return Ok(()) };
        let Ok(mut ns) = serde_json::from_slice::<Value>(&kv.value) else { return Ok(()) };
        if meta::meta_str(&ns, "deletionTimestamp").is_none() {
            return Ok(());
        }
        let mut held: Vec<String> = resources
            .iter()
            .zip(&remaining.per_prefix)
            .filter(|(_, n)| **n > 0)
            .map(|(r, n)| format!("{r} has {n} resource instances"))
            .collect();
        held.sort();
        let by_finalizer: Vec<String> =
            remaining.finalizers.iter().map(|(f, n)| format!("{f} in {n} resource instances")).collect();
        let content = format!("Some resources are remaining: {}", listed(held));
        let finalizers = format!("Some content in the namespace has finalizers remaining: {}", listed(by_finalizer));
        let wanted = [
            (
                "NamespaceDeletionDiscoveryFailure",
                "False",
                "ResourcesDiscovered",
                "All resources successfully discovered",
            ),
            (
                "NamespaceDeletionGroupVersionParsingFailure",
                "False",
                "ParsedGroupVersions",
                "All legacy kube types successfully parsed",
            ),
            (
                "NamespaceDeletionContentFailure",
                "False",
                "ContentDeleted",
                "All content successfully deleted, may be waiting on finalization",
            ),
            ("NamespaceContentRemaining", "True", "SomeResourcesRemain", content.as_str()),
            ("NamespaceFinalizersRemaining", "True", "SomeFinalizersRemain", finalizers.as_str()),
        ];
        let old = ns["status"]["conditions"].as_array().cloned().unwrap_or_default();
        let now = now_rfc3339();
        let conditions: Vec<Value> = wanted
            .iter()
            .map(|(kind, status, reason, message)| {
                // A condition's transition time moves only when its status does.
                let since = old
                    .iter()
                    .find(|c| c["type"] == *kind && c["status"] == *status)
                    .map_or_else(|| json!(now), |c| c["lastTransitionTime"].clone());
                json!({"type": kind, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
            })
            .collect();
        if old == conditions {
            return Ok(());
        }
        ns["status"]["conditions"] = Value::Array(conditions);
        // A conflict is a newer namespace (another replica's report, a status write): the next round
        // reports again if it still differs.
        match self.store.update(key, super::encode(&ns), kv.mod_revision).await {
            Ok(_) | Err(StoreError::NotFound) | Err(StoreError::Conflict { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Entries of a namespace condition's message: the first 20 and how many more, so that a tenant's
/// thousands of distinct finalizer names cannot grow its namespace object past what the store takes.
fn listed(mut entries: Vec<String>) -> String {
    const LISTED: usize = 20;
    let more = entries.len().saturating_sub(LISTED);
    entries.truncate(LISTED);
    let mut out = entries.join(", ");
    if more > 0 {
        out.push_str(&format!(", and {more} more"));
    }
    out
}

/// One key of a sweep: deleted, or with `Finalizers::Honor` and finalizers set, marked deleted and left.
/// Returns the finalizers it is left waiting for, if it is.
async fn sweep_one(
    store: &dyn crate::storage::Store,
    kv: KeyValue,
    finalizers: Finalizers,
) -> Result<Option<Vec<String>>, StoreError> {
    if finalizers == Finalizers::Honor {
        if let Ok(mut obj) = serde_json::from_slice::<Value>(&kv.value) {
            let waiting_for = meta::finalizers(&obj);
            if !waiting_for.is_empty() {
                if meta::meta_str(&obj, "deletionTimestamp").is_none() {
                    mark_deleted(&mut obj);
                    store.update(&kv.key, super::encode(&obj), kv.mod_revision).await?;
                }
                return Ok(Some(waiting_for));
            }
        }
    }
    store.delete(&kv.key, Some(kv.mod_revision)).await.map(|_| None)
}

fn patch_error(def: &ResourceDef, name: &str, e: patch::PatchError) -> ApiError {
    match e {
        patch::PatchError::UnsupportedMediaType => ApiError::unsupported_media_type(
            "application/strategic-merge-patch+json",
            &["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"],
        ),
        patch::PatchError::Conflict { conflicts } => {
            let mut err = ApiError::conflict(&def.plural, &def.group, name, "");
            err.message = patch::PatchError::Conflict { conflicts: conflicts.clone() }.to_string();
            err.causes = conflicts.into_iter().map(|c| cause("FieldManagerConflict", &c.field, c.message)).collect();
            err
        }
        patch::PatchError::TestFailed(msg) => invalid(def, name, vec![cause("FieldValueInvalid", "", msg)]),
        patch::PatchError::TooLarge(msg) => ApiError::too_large_because(msg),
        patch::PatchError::Rejected => ApiError::unprocessable(patch::PatchError::Rejected.to_string()),
        other => ApiError::bad_request(other.to_string()),
    }
}

/// Read a dotted path.
fn get_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(obj, |v, k| v.get(k))
}

/// Render a label selector object (`matchLabels`, `matchExpressions`) in its string form.
fn selector_string(sel: &Value) -> String {
    let mut parts = Vec::new();
    // A ReplicationController's selector is a plain label map, not a LabelSelector.
    let labels = match sel.get("matchLabels") {
        None if sel.get("matchExpressions").is_none() => Some(sel),
        labels => labels,
    };
    if let Some(m) = labels.and_then(Value::as_object) {
        for (k, v) in m {
            parts.push(format!("{k}={}", v.as_str().unwrap_or_default()));
        }
    }
    if let Some(exprs) = sel.get("matchExpressions").and_then(Value::as_array) {
        for e in exprs {
            let key = e["key"].as_str().unwrap_or_default();
            let vals: Vec<&str> =
                e["values"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => parts.push(format!("{key} in ({})", vals.join(","))),
                "NotIn" => parts.push(format!("{key} notin ({})", vals.join(","))),
                "Exists" => parts.push(key.to_string()),
                "DoesNotExist" => parts.push(format!("!{key}")),
                _ => {}
            }
        }
    }
    parts.join(",")
}

/// Subresources that are a view of some fields of their object: reads answer the whole object, and
/// writes change those fields only, as kube's strategy for each resets the rest.
pub const FIELD_SUBRESOURCES: &[&str] = &["status", "ephemeralcontainers", "resize", "approval", "finalize"];

/// `next`'s CSR conditions with the `Approved` and `Denied` ones `current` has in place of its own.
fn keep_decisions(current: &Value, next: &mut Value) {
    let decision = |c: &Value| c["type"] == "Approved" || c["type"] == "Denied";
    let mut conditions: Vec<Value> =
        next["status"]["conditions"].as_array().into_iter().flatten().filter(|c| !decision(c)).cloned().collect();
    conditions
        .extend(current["status"]["conditions"].as_array().into_iter().flatten().filter(|c| decision(c)).cloned());
    if let Some(status) = next.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("conditions".into(), Value::Array(conditions));
    }
    stamp_conditions(next);
}

/// CSR conditions without times get the time of the write, as kube stamps them.
fn stamp_conditions(obj: &mut Value) {
    let now = now_rfc3339();
    for c in obj.pointer_mut("/status/conditions").and_then(Value::as_array_mut).into_iter().flatten() {
        if let Some(c) = c.as_object_mut() {
            default_to(c, "lastUpdateTime", json!(now));
            default_to(c, "lastTransitionTime", json!(now));
        }
    }
}

/// `current` with the fields that a write through `subresource` owns taken from `desired`; `None`
/// when `subresource` is neither one of [`FIELD_SUBRESOURCES`] nor a pod's `binding`.
fn through_subresource(subresource: &str, current: &Value, desired: &Value) -> Option<Value> {
    let mut next = current.clone();
    let take = |next: &mut Value, path: &[&str]| {
        let from = path.iter().try_fold(desired, |v, k| v.get(*k));
        let Some((last, parents)) = path.split_last() else { return };
        let mut at = &mut *next;
        for k in parents {
            if !at.get(*k).is_some_and(Value::is_object) {
                at[*k] = json!({});
            }
            at = &mut at[*k];
        }
        match (from, at.as_object_mut()) {
            (Some(v), Some(m)) => {
                m.insert(last.to_string(), v.clone());
            }
            (None, Some(m)) => {
                m.remove(*last);
            }
            _ => {}
        }
    };
    match subresource {
        "status" => {
            next["status"] = desired.get("status").cloned().unwrap_or(json!({}));
            if current["kind"] == "CertificateSigningRequest" {
                // A signer writes the certificate and its own conditions; the decision is the approver's.
                keep_decisions(current, &mut next);
            }
            if current["kind"] == "Pod" && next["status"].is_object() {
                // As kube's pod status strategy and conversion: a status without a QoS class keeps the
                // stored one, and the IP lists follow their single fields.
                if next["status"]["qosClass"].as_str().is_none_or(str::is_empty) {
                    if let Some(qos) = current["status"].get("qosClass") {
                        next["status"]["qosClass"] = qos.clone();
                    }
                }
                super::validation::normalize_pod_ips(&mut next["status"]);
            }
        }
        "ephemeralcontainers" => take(&mut next, &["spec", "ephemeralContainers"]),
        "approval" => {
            take(&mut next, &["status", "conditions"]);
            stamp_conditions(&mut next);
        }
        "finalize" => take(&mut next, &["spec", "finalizers"]),
        // Not served as a view (it is a create of a Binding), but the write it makes is of this field.
        "binding" => take(&mut next, &["spec", "nodeName"]),
        "resize" => {
            // Only each container's resources and resize policy, matched by name.
            // By name, through a map: a pod of ten thousand containers is no reason for 10^8 compares.
            let wanted: std::collections::HashMap<&str, &Value> = desired["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|w| Some((w.get("name")?.as_str()?, w)))
                .collect();
            for c in next["spec"]["containers"].as_array_mut().into_iter().flatten() {
                let Some(w) = c.get("name").and_then(Value::as_str).and_then(|n| wanted.get(n)).copied() else {
                    continue;
                };
                for f in ["resources", "resizePolicy"] {
                    match (w.get(f), c.as_object_mut()) {
                        (Some(v), Some(m)) => {
                            m.insert(f.into(), v.clone());
                        }
                        (None, Some(m)) => {
                            m.remove(f);
                        }
                        _ => {}
                    }
                }
            }
        }
        _ => return None,
    }
    Some(next)
}

/// The `autoscaling/v1` Scale view of an object.
pub fn scale_of(def: &ResourceDef, obj: &Value) -> ApiResult<Value> {
    let sc = def.scale.as_ref().ok_or_else(ApiError::path_not_found)?;
    let m = meta::metadata(obj).cloned().unwrap_or_default();
    let mut meta_out = Map::new();
    for f in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = m.get(f) {
            meta_out.insert(f.into(), v.clone());
        }
    }
    let spec_replicas = get_path(obj, &sc.spec_replicas).and_then(Value::as_i64).unwrap_or(0);
    let status_replicas = get_path(obj, &sc.status_replicas).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": status_replicas});
    match get_path(obj, &sc.selector) {
        // Custom resources keep the selector as a string already (`labelSelectorPath`).
        Some(Value::String(s)) => status["selector"] = json!(s),
        Some(sel) if !sc.selector.is_empty() => status["selector"] = json!(selector_string(sel)),
        _ => {}
    }
    Ok(
        json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": meta_out, "spec": {"replicas": spec_replicas}, "status": status}),
    )
}

/// Write a Scale's `spec.replicas` into the object.
fn apply_scale(def: &ResourceDef, current: &Value, scale: &Value) -> ApiResult<Value> {
    let name = meta::meta_str(current, "name").unwrap_or_default();
    let replicas = scale.get("spec").and_then(|s| s.get("replicas"));
    let n = match replicas {
        None | Some(Value::Null) => 0,
        Some(v) => v.as_i64().ok_or_else(|| ApiError::bad_request("spec.replicas must be an integer"))?,
    };
    if n < 0 {
        return Err(ApiError::invalid(
            "Scale",
            "autoscaling",
            name,
            vec![cause(
                "FieldValueInvalid",
                "spec.replicas",
                format!("Invalid value: {n}: must be greater than or equal to 0"),
            )],
        ));
    }
    let mut next = current.clone();
    let mut target = &mut next;
    let path: Vec<&str> = def.scale.as_ref().ok_or_else(ApiError::path_not_found)?.spec_replicas.split('.').collect();
    for (i, k) in path.iter().enumerate() {
        if i + 1 == path.len() {
            target[*k] = json!(n);
        } else {
            if !target.get(*k).is_some_and(Value::is_object) {
                target[*k] = json!({});
            }
            target = &mut target[*k];
        }
    }
    Ok(next)
}

/// A namespace's phase follows its deletion, as kube's namespace status strategy checks: a status
/// write can neither mark a live namespace Terminating (which stops every create in it) nor bring a
/// deleting one back to Active. No phase is Active, as kube defaults it.
fn namespace_phase(desired: &mut Value) -> ApiResult<()> {
    let deleting = meta::meta_str(desired, "deletionTimestamp").is_some();
    let given = desired.get("status").and_then(|s| s.get("phase")).and_then(Value::as_str).unwrap_or("");
    let phase = if given.is_empty() { "Active" } else { given }.to_string();
    let (want, why) = if deleting {
        ("Terminating", "may only be 'Terminating' if `deletionTimestamp` is not empty")
    } else {
        ("Active", "may only be 'Active' if `deletionTimestamp` is empty")
    };
    if phase != want {
        let name = meta::meta_str(desired, "name").unwrap_or_default();
        let message = format!("Invalid value: {}: {why}", meta::go_quote(&phase));
        return Err(ApiError::invalid(
            "Namespace",
            "",
            name,
            vec![cause("FieldValueInvalid", "status.Phase", message)],
        ));
    }
    if let Some(status) = desired.get_mut("status").and_then(Value::as_object_mut) {
        status.insert("phase".into(), json!(phase));
    }
    Ok(())
}

/// What every update does once the client's object is in hand (PUT, and patches of every type): keep
/// the server's metadata and the kind's allocated fields, refresh a CRD's status, validate, bump the
/// generation when the spec changed, and refuse new finalizers on an object being deleted.
fn settle_update(ctx: &Ctx<'_>, current: &Value, desired: &mut Value, subresource: Option<&str>) -> ApiResult<()> {
    let def = ctx.def;
    keep_server_meta(current, desired);
    service_update(def, current, desired, subresource)?;
    super::gates::drop_disabled(&def.group, &def.kind, desired, Some(current));
    if def.group.is_empty() && def.kind == "Namespace" && subresource == Some("status") {
        namespace_phase(desired)?;
    }
    if def.group.is_empty() && def.kind == "Pod" && subresource != Some("ephemeralcontainers") {
        // As kube's pod strategy: only the ephemeralcontainers subresource changes them.
        match current["spec"].get("ephemeralContainers") {
            Some(kept) if desired["spec"].is_object() => desired["spec"]["ephemeralContainers"] = kept.clone(),
            _ => {
                desired["spec"].as_object_mut().map(|m| m.remove("ephemeralContainers"));
            }
        }
    }
    go_shape(def, desired);
    if def.group == "apiextensions.k8s.io" && subresource.is_none() {
        crate::crd::refresh_status(current, desired);
    }
    validate_object(ctx, desired, Some(current), subresource)?;
    // Scale writes change the spec, so they bump generation; status writes never do.
    if subresource != Some("status") && !meta::spec_equal(current, desired) {
        if let Some(g) = meta::metadata(current).and_then(|m| m.get("generation")).and_then(Value::as_i64) {
            set_meta(desired, "generation", json!(g + 1));
        }
    }
    if meta::meta_str(current, "deletionTimestamp").is_some() {
        // New finalizers cannot be added to an object that is going away.
        let old: Vec<String> = meta::finalizers(current);
        let new = meta::finalizers(desired);
        if new.iter().any(|f| !old.contains(f)) {
            return Err(invalid(
                def,
                meta::meta_str(current, "name").unwrap_or_default(),
                vec![cause(
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being deleted",
                )],
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autoscalers_get_kubes_defaults_and_keep_what_they_set() {
        let v2 = crate::resources::find("autoscaling", "v2", "horizontalpodautoscalers").unwrap();
        let mut hpa =
            json!({"spec": {"maxReplicas": 3, "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60}}}});
        type_defaults(&v2, &mut hpa);
        let spec = &hpa["spec"];
        assert_eq!(spec["minReplicas"], 1);
        assert_eq!(spec["metrics"][0]["resource"]["target"]["averageUtilization"], 80);
        assert_eq!(spec["behavior"]["scaleUp"]["policies"].as_array().unwrap().len(), 2);
        assert_eq!(spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"], 60, "what was set stays: {spec}");
        assert_eq!(spec["behavior"]["scaleDown"]["selectPolicy"], "Max");
        let mut plain = json!({"spec": {"maxReplicas": 3, "minReplicas": 2}});
        type_defaults(&v2, &mut plain);
        assert!(plain["spec"].get("behavior").is_none(), "no behavior is made up: {plain}");
        assert_eq!(plain["spec"]["minReplicas"], 2);
        let v1 = crate::resources::find("autoscaling", "v1", "horizontalpodautoscalers").unwrap();
        let mut old = json!({"spec": {"maxReplicas": 3}});
        type_defaults(&v1, &mut old);
        assert!(old["spec"].get("targetCPUUtilizationPercentage").is_none(), "v1's target stays implied: {old}");
        assert_eq!(old["spec"]["minReplicas"], 1);
    }

    /// Type defaults fill what a write leaves out or sends as null, and leave what is of the wrong
    /// shape to the type check rather than failing on it or copying it.
    #[test]
    fn type_defaults_fill_absent_and_null_fields_and_never_fail() {
        let svc = crate::resources::find("", "v1", "services").unwrap();
        let mut obj = json!({"spec": null});
        type_defaults(&svc, &mut obj);
        assert_eq!(
            obj["spec"],
            json!({"type": "ClusterIP", "sessionAffinity": "None", "internalTrafficPolicy": "Cluster"})
        );
        let mut obj = json!({"spec": {"ports": [null, {"port": 80}, {"port": "x"}, 7]}});
        type_defaults(&svc, &mut obj);
        assert_eq!(
            obj["spec"]["ports"],
            json!([{"protocol": "TCP"}, {"port": 80, "protocol": "TCP", "targetPort": 80}, {"port": "x", "protocol": "TCP"}, 7])
        );
        for odd in [json!({"spec": 5}), json!([1])] {
            let mut obj = odd.clone();
            type_defaults(&svc, &mut obj);
            assert_eq!(obj.get("spec"), odd.get("spec"), "left for the type check to refuse");
        }
        let mut obj = json!({"spec": {"ports": "all"}});
        type_defaults(&svc, &mut obj);
        assert_eq!(obj["spec"]["ports"], "all");
        let deploy = crate::resources::find("apps", "v1", "deployments").unwrap();
        let mut obj = json!({"spec": null});
        type_defaults(&deploy, &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        let mut obj = json!({"spec": {"replicas": null}});
        type_defaults(&deploy, &mut obj);
        assert_eq!(obj["spec"]["replicas"], 1);
        let mut obj = json!({"spec": {"replicas": 0}});
        type_defaults(&deploy, &mut obj);
        assert_eq!(obj["spec"]["replicas"], 0, "zero is a value");
        let sc = crate::resources::find("storage.k8s.io", "v1", "storageclasses").unwrap();
        let mut obj = json!({"provisioner": "x", "reclaimPolicy": null, "volumeBindingMode": "WaitForFirstConsumer"});
        type_defaults(&sc, &mut obj);
        assert_eq!(
            (&obj["reclaimPolicy"], &obj["volumeBindingMode"]),
            (&json!("Delete"), &json!("WaitForFirstConsumer"))
        );
        let pc = crate::resources::find("scheduling.k8s.io", "v1", "priorityclasses").unwrap();
        let mut obj = json!({"value": 5, "preemptionPolicy": null});
        type_defaults(&pc, &mut obj);
        assert_eq!(obj["preemptionPolicy"], "PreemptLowerPriority");
        let slices = crate::resources::find("discovery.k8s.io", "v1", "endpointslices").unwrap();
        let mut obj = json!({"ports": [{"port": 80, "protocol": null}, {"port": 53, "protocol": "UDP"}]});
        type_defaults(&slices, &mut obj);
        // As kube: a port's name is a pointer defaulted to "".
        assert_eq!(
            obj["ports"],
            json!([{"name": "", "port": 80, "protocol": "TCP"}, {"name": "", "port": 53, "protocol": "UDP"}])
        );
    }

    /// A registry on an embedded store in a temporary directory (kept alive by the first value).
    fn embedded_registry() -> (tempfile::TempDir, Registry) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::storage::embedded::EmbeddedStore::open(dir.path()).unwrap();
        (dir, Registry::new(std::sync::Arc::new(store), "/registry"))
    }

    /// A release that starts from a value read earlier never acts on what that value no longer is: the
    /// object changed since (another finalizer went) still loses its finalizer, and a new object of
    /// the same name, not being deleted, keeps its own.
    #[tokio::test]
    async fn a_finalizer_removed_from_a_stale_read_acts_on_the_object_as_it_is() {
        let (_dir, r) = embedded_registry();
        let def = crate::resources::logical_cluster_def();
        let key = keys::object("/registry", def.storage_group(), &def.plural, "root", None, "x");
        let deleting = |finalizers: &[&str]| json!({"metadata": {"name": "x", "deletionTimestamp": now_rfc3339(), "finalizers": finalizers}});
        r.store.create(&key, super::super::encode(&deleting(&["a", "b"]))).await.unwrap();
        let stale = r.store.get(&key).await.unwrap().unwrap();
        let kv = r.store.get(&key).await.unwrap().unwrap();
        r.store.update(&key, super::super::encode(&deleting(&["a"])), kv.mod_revision).await.unwrap();
        assert!(r.remove_finalizer_from(&def, "root", "x", "a", Some(stale.clone())).await.unwrap());
        assert!(r.store.get(&key).await.unwrap().is_none(), "its last finalizer went, so did it");
        let fresh = json!({"metadata": {"name": "x", "finalizers": ["a"]}});
        r.store.create(&key, super::super::encode(&fresh)).await.unwrap();
        assert!(!r.remove_finalizer_from(&def, "root", "x", "a", Some(stale)).await.unwrap());
        let kept = r.store.get(&key).await.unwrap().expect("the new object stays");
        assert_eq!(serde_json::from_slice::<Value>(&kept.value).unwrap()["metadata"]["finalizers"], json!(["a"]));
    }

    /// The default ServiceAccount, like every create, lands only in a namespace that is not terminating.
    #[tokio::test]
    async fn default_service_account_only_in_a_live_namespace() {
        let (_dir, r) = embedded_registry();
        let ns_key = |ns: &str| keys::object("/registry", "core", "namespaces", "root", None, ns);
        let sa_key = |ns: &str| keys::object("/registry", "core", "serviceaccounts", "root", Some(ns), "default");
        let live = json!({"metadata": {"name": "live"}});
        r.store.create(&ns_key("live"), super::super::encode(&live)).await.unwrap();
        let going = json!({"metadata": {"name": "going", "deletionTimestamp": now_rfc3339()}, "status": {"phase": "Terminating"}});
        r.store.create(&ns_key("going"), super::super::encode(&going)).await.unwrap();
        for ns in ["live", "going", "absent"] {
            r.ensure_namespace_defaults("root", ns).await.unwrap();
        }
        assert!(r.store.get(&sa_key("live")).await.unwrap().is_some());
        assert!(r.store.get(&sa_key("going")).await.unwrap().is_none(), "not into a terminating namespace");
        assert!(r.store.get(&sa_key("absent")).await.unwrap().is_none(), "not into a missing one");
    }

    /// Repeating `kubectl delete ns` on a namespace held by finalizers (what people do when one hangs)
    /// keeps one cleanup task, not one per DELETE; the task is forgotten when it ends.
    #[tokio::test]
    async fn one_cleanup_per_terminating_namespace() {
        let (_dir, r) = embedded_registry();
        let store = r.store.clone();
        let ns_key = keys::object("/registry", "core", "namespaces", "root", None, "held");
        let ns = json!({"metadata": {"name": "held", "deletionTimestamp": now_rfc3339()}, "status": {"phase": "Terminating"}});
        store.create(&ns_key, super::super::encode(&ns)).await.unwrap();
        let cm_key = keys::object("/registry", "core", "configmaps", "root", Some("held"), "kept");
        let cm = json!({"metadata": {"name": "kept", "namespace": "held", "finalizers": ["example.com/x"]}});
        store.create(&cm_key, super::super::encode(&cm)).await.unwrap();
        let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
        let before = tasks();
        for _ in 0..5 {
            r.spawn_namespace_cleanup("root".into(), "held".into());
        }
        assert_eq!(tasks() - before, 1, "repeated deletes share the running cleanup");
        // Released: the one task removes the object and the namespace, and is forgotten.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            if let Some(kv) = store.get(&cm_key).await.unwrap() {
                let mut obj: Value = serde_json::from_slice(&kv.value).unwrap();
                if obj["metadata"]["deletionTimestamp"].is_string() {
                    obj["metadata"]["finalizers"] = json!([]);
                    let _ = store.update(&cm_key, super::super::encode(&obj), kv.mod_revision).await;
                }
            }
            if store.get(&ns_key).await.unwrap().is_none() && r.cleaning.is_empty() {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the namespace cleanup did not finish");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    #[test]
    fn condition_messages_list_twenty_entries_and_count_the_rest() {
        let entries = |n: usize| (0..n).map(|i| format!("f{i} in 1 resource instances")).collect::<Vec<_>>();
        assert_eq!(listed(entries(2)), "f0 in 1 resource instances, f1 in 1 resource instances");
        let many = listed(entries(1000));
        assert!(many.starts_with("f0 in") && many.ends_with(", and 980 more"), "{many}");
        assert_eq!(many.matches("resource instances").count(), 20);
    }

    #[test]
    fn scale_view_and_write_back() {
        let def = crate::resources::find("apps", "v1", "deployments").unwrap();
        let d = json!({"metadata":{"name":"d","namespace":"n","resourceVersion":"5"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"x"}}},"status":{"replicas":1}});
        let s = scale_of(&def, &d).unwrap();
        assert_eq!(s["spec"]["replicas"], 2);
        assert_eq!(s["status"]["selector"], "app=x");
        let next = apply_scale(&def, &d, &json!({"spec":{"replicas":5}})).unwrap();
        assert_eq!(next["spec"]["replicas"], 5);
        assert!(apply_scale(&def, &d, &json!({"spec":{"replicas":-1}})).is_err());
    }

    #[test]
    fn wrong_api_version_is_rejected_and_missing_is_filled() {
        let def = crate::resources::find("", "v1", "configmaps").unwrap();
        let mut bad = json!({"apiVersion":"apps/v1","kind":"ConfigMap"});
        assert_eq!(check_type(&def, &mut bad).unwrap_err().code, 400);
        let mut none = json!({"data":{}});
        check_type(&def, &mut none).unwrap();
        assert_eq!(none["kind"], "ConfigMap");
    }
}
