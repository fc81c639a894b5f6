//! The `paths` section of a group-version document: kube-apiserver's collection, item and
//! subresource endpoints with the operation metadata kubectl inspects.

use serde_json::{json, Map, Value};

use super::schema::ref_to;

/// One resource the caller serves in a group/version (built-ins and, later, CRDs).
///
/// A `plural` of the form `parent/sub` (e.g. `serviceaccounts/token`) describes a
/// subresource whose body is `kind`.
pub struct ResourceOps<'a> {
    /// Resource name, e.g. `deployments`.
    pub plural: &'a str,
    /// Kind of the objects, e.g. `Deployment`.
    pub kind: &'a str,
    /// Whether the resource lives in namespaces.
    pub namespaced: bool,
    /// Whether a `/status` subresource is served.
    pub status: bool,
    /// Whether a `/scale` subresource is served.
    pub scale: bool,
    /// Verbs as in discovery: get, list, watch, create, update, patch, delete, deletecollection.
    pub verbs: &'a [&'a str],
}

/// The schema an operation reads or writes, with its group-version-kind.
pub(super) struct Target<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub kind: &'a str,
    pub def: &'a str,
    pub list_def: Option<&'a str>,
    /// Whether to advertise strategic merge patch.
    pub strategic: bool,
}

impl Target<'_> {
    fn gvk(&self) -> Value {
        json!({"group": self.group, "kind": self.kind, "version": self.version})
    }
}

const PATCH_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const STATUS_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
const DELETE_OPTIONS_DEF: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";

/// Subresources that stream from a kubelet or a pod network rather than read or write an object, with
/// the kind their options are (none for a log, whose options are a pod's).
const STREAMS: &[&str] = &["attach", "exec", "log", "portforward", "proxy"];

/// Adds the endpoints of `r` if it is a streaming subresource (see [`STREAMS`]), as kube-apiserver
/// publishes them: `connect` operations answering a string (a log's is a `get`), named after `owner`.
/// False, adding nothing, for anything else.
pub(super) fn add_stream(
    paths: &mut Map<String, Value>,
    group: &str,
    version: &str,
    r: &ResourceOps,
    owner: &str,
) -> bool {
    let Some((parent, sub)) = r.plural.split_once('/').filter(|(_, sub)| STREAMS.contains(sub)) else {
        return false;
    };
    let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let ns = if r.namespaced { "/namespaces/{namespace}" } else { "" };
    let names = Names::new(group, version, r.namespaced);
    let gvk = json!({"group": group, "kind": r.kind, "version": version});
    let suffix = capitalize(sub);
    let text = json!({"schema": {"type": "string"}});
    let op = |action: &str, id: String, description: String, content: Value| {
        json!({"tags": [names.tag], "description": description, "operationId": id, "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
            "responses": {"200": {"description": "OK", "content": content}, "401": {"description": "Unauthorized"}}})
    };
    let mut ops = Map::new();
    if sub == "log" {
        let content: Map<String, Value> =
            ["application/json", "application/yaml", "application/vnd.kubernetes.protobuf", "text/plain"]
                .into_iter()
                .map(|t| (t.to_string(), text.clone()))
                .collect();
        let id = names.id("read", owner, &suffix);
        ops.insert("get".into(), op("get", id, format!("read log of the specified {owner}"), Value::Object(content)));
    } else {
        for (verb, method) in
            [("get", "get"), ("create", "post"), ("update", "put"), ("patch", "patch"), ("delete", "delete")]
        {
            if r.verbs.contains(&verb) {
                // kube puts the method after the group-version: `connectCoreV1GetNamespacedPodExec`.
                let scope = if r.namespaced { "Namespaced" } else { "" };
                let id = format!("connect{}{}{scope}{owner}{suffix}", names.gv, capitalize(method));
                let description = format!("connect {} requests to {sub} of {owner}", method.to_uppercase());
                ops.insert(method.into(), op("connect", id, description, json!({"*/*": text})));
            }
        }
    }
    let path = format!("{prefix}{ns}/{parent}/{{name}}/{sub}");
    if sub == "proxy" {
        // A proxy also takes the rest of the path after it.
        let with_path: Map<String, Value> = ops
            .iter()
            .map(|(m, op)| {
                let mut op = op.clone();
                let id = op["operationId"].as_str().unwrap_or_default().to_string();
                op["operationId"] = json!(format!("{id}WithPath"));
                (m.clone(), op)
            })
            .collect();
        insert_path(paths, format!("{path}/{{path}}"), with_path, r.namespaced, true);
        if let Some(Value::Array(params)) =
            paths.get_mut(&format!("{path}/{{path}}")).and_then(|p| p.get_mut("parameters"))
        {
            params.insert(1, path_param("path", "path to the resource"));
        }
    }
    insert_path(paths, path, ops, r.namespaced, true);
    true
}

/// Adds every endpoint of `r` to `paths`; a subresource's operations are named after `owner`, the kind
/// of the resource it belongs to.
pub(super) fn add_resource(
    paths: &mut Map<String, Value>,
    group: &str,
    version: &str,
    r: &ResourceOps,
    owner: &str,
    target: &Target,
    scale: Option<&Target>,
) {
    let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let ns = if r.namespaced { "/namespaces/{namespace}" } else { "" };
    let names = Names::new(group, version, r.namespaced);
    let has = |v: &str| r.verbs.contains(&v);

    if let Some((parent, sub)) = r.plural.split_once('/') {
        let path = format!("{prefix}{ns}/{parent}/{{name}}/{sub}");
        let suffix = capitalize(sub);
        // Named after the owner, described by the body's own kind.
        let named = Target { kind: owner, ..*target };
        let mut item = Map::new();
        if has("create") {
            item.insert("post".into(), names.create(&named, &suffix));
        }
        if has("get") {
            item.insert("get".into(), names.read(&named, &suffix));
        }
        if has("update") {
            item.insert("put".into(), names.replace(&named, &suffix));
        }
        if has("patch") {
            item.insert("patch".into(), names.patch(&named, &suffix));
        }
        for op in item.values_mut() {
            op["x-kubernetes-group-version-kind"] = target.gvk();
        }
        insert_path(paths, path, item, r.namespaced, true);
        return;
    }

    let collection = format!("{prefix}{ns}/{}", r.plural);
    let mut coll = Map::new();
    if has("list") {
        coll.insert("get".into(), names.list(target, false));
    }
    if has("create") {
        coll.insert("post".into(), names.create(target, ""));
    }
    if has("deletecollection") {
        coll.insert("delete".into(), names.delete_collection(target));
    }
    insert_path(paths, collection.clone(), coll, r.namespaced, false);

    let item_path = format!("{collection}/{{name}}");
    let mut item = Map::new();
    if has("get") {
        item.insert("get".into(), names.read(target, ""));
    }
    if has("update") {
        item.insert("put".into(), names.replace(target, ""));
    }
    if has("patch") {
        item.insert("patch".into(), names.patch(target, ""));
    }
    if has("delete") {
        item.insert("delete".into(), names.delete(target));
    }
    insert_path(paths, item_path.clone(), item, r.namespaced, true);

    if r.namespaced && has("list") {
        let mut all = Map::new();
        all.insert("get".into(), names.list(target, true));
        insert_path(paths, format!("{prefix}/{}", r.plural), all, false, false);
    }

    let mut sub = |name: &str, t: &Target| {
        let suffix = capitalize(name);
        let mut ops = Map::new();
        if has("get") {
            ops.insert("get".into(), names.read(t, &suffix));
        }
        if has("update") {
            ops.insert("put".into(), names.replace(t, &suffix));
        }
        if has("patch") {
            ops.insert("patch".into(), names.patch(t, &suffix));
        }
        insert_path(paths, format!("{item_path}/{name}"), ops, r.namespaced, true);
    };
    if r.status {
        sub("status", target);
    }
    if r.scale {
        if let Some(scale) = scale {
            // The scale subresource is named after the parent kind in operation ids.
            let t = Target { kind: target.kind, ..*scale };
            let mut ops = Map::new();
            let suffix = "Scale";
            if has("get") {
                ops.insert("get".into(), names.read(&t, suffix));
            }
            if has("update") {
                ops.insert("put".into(), names.replace(&t, suffix));
            }
            if has("patch") {
                ops.insert("patch".into(), names.patch(&t, suffix));
            }
            // Operation ids use the parent kind, but the GVK must be Scale's own.
            for op in ops.values_mut() {
                op["x-kubernetes-group-version-kind"] = scale.gvk();
            }
            insert_path(paths, format!("{item_path}/scale"), ops, r.namespaced, true);
        }
    }
}

/// Inserts a path item with its path-level parameters, unless it has no operations.
fn insert_path(
    paths: &mut Map<String, Value>,
    path: String,
    mut ops: Map<String, Value>,
    namespaced: bool,
    named: bool,
) {
    if ops.is_empty() {
        return;
    }
    let mut params = Vec::new();
    if named {
        params.push(path_param("name", "name of the resource"));
    }
    if namespaced {
        params.push(path_param("namespace", "object name and auth scope, such as for teams and projects"));
    }
    params.push(query_param(
        "pretty",
        "If 'true', then the output is pretty printed. Defaults to 'false' unless the user-agent indicates a browser or command-line HTTP tool (curl and wget).",
        "string",
    ));
    ops.insert("parameters".into(), Value::Array(params));
    paths.insert(path, Value::Object(ops));
}

fn path_param(name: &str, description: &str) -> Value {
    json!({
        "name": name,
        "in": "path",
        "description": description,
        "required": true,
        "schema": {"type": "string", "uniqueItems": true},
    })
}

fn query_param(name: &str, description: &str, ty: &str) -> Value {
    json!({
        "name": name,
        "in": "query",
        "description": description,
        "schema": {"type": ty, "uniqueItems": true},
    })
}

fn dry_run() -> Value {
    query_param(
        "dryRun",
        "When present, indicates that modifications should not be persisted. An invalid or unrecognized dryRun directive will result in an error response and no further processing of the request. Valid values are: - All: all dry run stages will be processed",
        "string",
    )
}

fn field_manager() -> Value {
    query_param(
        "fieldManager",
        "fieldManager is a name associated with the actor or entity that is making these changes. The value must be less than or 128 characters long, and only contain printable characters, as defined by https://golang.org/pkg/unicode/#IsPrint.",
        "string",
    )
}

fn field_validation() -> Value {
    query_param(
        "fieldValidation",
        "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: - Ignore: This will ignore any unknown fields that are silently dropped from the object, and will ignore all but the last duplicate field that the decoder encounters. This is the default behavior prior to v1.23. - Warn: This will send a warning via the standard warning response header for each unknown field that is dropped from the object, and for each duplicate field that is encountered. The request will still succeed if there are no other errors, and will only persist the last of any duplicate fields. This is the default in v1.23+ - Strict: This will fail the request with a BadRequest error if any unknown fields would be dropped from the object, or if any duplicate fields are present. The error returned from the server will contain all unknown and duplicate fields encountered.",
        "string",
    )
}

fn force() -> Value {
    query_param(
        "force",
        "Force is going to \"force\" Apply requests. It means user will re-acquire conflicting fields owned by other people. Force flag must be unset for non-apply patch requests.",
        "boolean",
    )
}

fn list_params() -> Vec<Value> {
    vec![
        query_param("allowWatchBookmarks", "allowWatchBookmarks requests watch events with type \"BOOKMARK\".", "boolean"),
        query_param("continue", "The continue option should be set when retrieving more results from the server.", "string"),
        query_param("fieldSelector", "A selector to restrict the list of returned objects by their fields. Defaults to everything.", "string"),
        query_param("labelSelector", "A selector to restrict the list of returned objects by their labels. Defaults to everything.", "string"),
        query_param("limit", "limit is a maximum number of responses to return for a list call.", "integer"),
        query_param("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from.", "string"),
        query_param("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls.", "string"),
        query_param("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`.", "boolean"),
        query_param("timeoutSeconds", "Timeout for the list/watch call.", "integer"),
        query_param("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications.", "boolean"),
    ]
}

fn delete_params() -> Vec<Value> {
    vec![
        dry_run(),
        query_param("gracePeriodSeconds", "The duration in seconds before the object should be deleted.", "integer"),
        query_param("ignoreStoreReadErrorWithClusterBreakingPotential", "if set to true, it will trigger an unsafe deletion of the resource in case the normal deletion flow fails with a corrupt object error.", "boolean"),
        query_param("orphanDependents", "Deprecated: please use the PropagationPolicy, this field will be deprecated in 1.7.", "boolean"),
        query_param("propagationPolicy", "Whether and how garbage collection will be performed. Acceptable values are: 'Orphan', 'Background', 'Foreground'.", "string"),
    ]
}

/// Response content for a schema, in the media types kube-apiserver lists.
fn content(def: &str, watch: bool) -> Value {
    let mut types = vec!["application/json", "application/yaml", "application/vnd.kubernetes.protobuf"];
    if watch {
        types.extend(["application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch"]);
    }
    let mut m = Map::new();
    for t in types {
        m.insert(t.into(), json!({"schema": ref_to(def)}));
    }
    Value::Object(m)
}

fn response(def: &str, codes: &[(&str, &str)]) -> Value {
    let mut m = Map::new();
    for (code, desc) in codes {
        m.insert((*code).into(), json!({"description": desc, "content": content(def, false)}));
    }
    m.insert("401".into(), json!({"description": "Unauthorized"}));
    Value::Object(m)
}

fn json_body(def: &str) -> Value {
    json!({"content": {"*/*": {"schema": ref_to(def)}}, "required": true})
}

/// Operation ids and tags, derived the way kube-apiserver names them.
struct Names {
    /// `AppsV1`, `CoreV1`, `RbacAuthorizationV1`.
    gv: String,
    tag: String,
    namespaced: bool,
}

impl Names {
    fn new(group: &str, version: &str, namespaced: bool) -> Names {
        let short = group.strip_suffix(".k8s.io").unwrap_or(group);
        let parts: Vec<&str> = if short.is_empty() { vec!["core"] } else { short.split('.').collect() };
        let camel: String = parts.iter().map(|p| capitalize(p)).collect();
        let mut lower = camel.clone();
        if let Some(first) = lower.get_mut(0..1) {
            first.make_ascii_lowercase();
        }
        Names { gv: format!("{camel}{}", capitalize(version)), tag: format!("{lower}_{version}"), namespaced }
    }

    fn id(&self, verb: &str, kind: &str, suffix: &str) -> String {
        let ns = if self.namespaced { "Namespaced" } else { "" };
        format!("{verb}{}{ns}{kind}{suffix}", self.gv)
    }

    fn op(&self, t: &Target, action: &str, id: String, description: String) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("tags".into(), json!([self.tag]));
        m.insert("description".into(), json!(description));
        m.insert("operationId".into(), json!(id));
        m.insert("x-kubernetes-action".into(), json!(action));
        m.insert("x-kubernetes-group-version-kind".into(), t.gvk());
        m
    }

    fn list(&self, t: &Target, all_namespaces: bool) -> Value {
        let id = if all_namespaces {
            format!("list{}{}ForAllNamespaces", self.gv, t.kind)
        } else {
            self.id("list", t.kind, "")
        };
        let mut m = self.op(t, "list", id, format!("list or watch objects of kind {}", t.kind));
        m.insert("parameters".into(), Value::Array(list_params()));
        let def = t.list_def.unwrap_or(t.def);
        m.insert(
            "responses".into(),
            json!({"200": {"description": "OK", "content": content(def, true)}, "401": {"description": "Unauthorized"}}),
        );
        Value::Object(m)
    }

    fn create(&self, t: &Target, suffix: &str) -> Value {
        let mut m = self.op(t, "post", self.id("create", t.kind, suffix), format!("create {}{suffix}", t.kind));
        m.insert("parameters".into(), json!([dry_run(), field_manager(), field_validation()]));
        m.insert("requestBody".into(), json_body(t.def));
        m.insert("responses".into(), response(t.def, &[("200", "OK"), ("201", "Created"), ("202", "Accepted")]));
        Value::Object(m)
    }

    fn read(&self, t: &Target, suffix: &str) -> Value {
        let mut m =
            self.op(t, "get", self.id("read", t.kind, suffix), format!("read the specified {}{suffix}", t.kind));
        m.insert("responses".into(), response(t.def, &[("200", "OK")]));
        Value::Object(m)
    }

    fn replace(&self, t: &Target, suffix: &str) -> Value {
        let mut m =
            self.op(t, "put", self.id("replace", t.kind, suffix), format!("replace the specified {}{suffix}", t.kind));
        m.insert("parameters".into(), json!([dry_run(), field_manager(), field_validation()]));
        m.insert("requestBody".into(), json_body(t.def));
        m.insert("responses".into(), response(t.def, &[("200", "OK"), ("201", "Created")]));
        Value::Object(m)
    }

    fn patch(&self, t: &Target, suffix: &str) -> Value {
        let mut m = self.op(
            t,
            "patch",
            self.id("patch", t.kind, suffix),
            format!("partially update the specified {}{suffix}", t.kind),
        );
        m.insert("parameters".into(), json!([dry_run(), field_manager(), field_validation(), force()]));
        let mut types =
            vec!["application/apply-patch+yaml", "application/json-patch+json", "application/merge-patch+json"];
        if t.strategic {
            types.push("application/strategic-merge-patch+json");
        }
        let mut body = Map::new();
        for ty in types {
            body.insert(ty.into(), json!({"schema": ref_to(PATCH_DEF)}));
        }
        m.insert("requestBody".into(), json!({"content": body, "required": true}));
        m.insert("responses".into(), response(t.def, &[("200", "OK"), ("201", "Created")]));
        Value::Object(m)
    }

    fn delete(&self, t: &Target) -> Value {
        let mut m = self.op(t, "delete", self.id("delete", t.kind, ""), format!("delete a {}", t.kind));
        m.insert("parameters".into(), Value::Array(delete_params()));
        m.insert("requestBody".into(), json_body(DELETE_OPTIONS_DEF));
        m.insert("responses".into(), response(STATUS_DEF, &[("200", "OK"), ("202", "Accepted")]));
        Value::Object(m)
    }

    fn delete_collection(&self, t: &Target) -> Value {
        let mut m = self.op(
            t,
            "deletecollection",
            self.id("deleteCollection", t.kind, ""),
            format!("delete collection of {}", t.kind),
        );
        let mut params = list_params();
        params.extend(delete_params());
        m.insert("parameters".into(), Value::Array(params));
        m.insert("requestBody".into(), json_body(DELETE_OPTIONS_DEF));
        m.insert("responses".into(), response(STATUS_DEF, &[("200", "OK")]));
        Value::Object(m)
    }
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}
