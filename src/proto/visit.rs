//! Walks a built-in object along its type's schema, handing each JSON object in it to a visitor with
//! the name of the Go struct it is (`core.v1.Container`, `apps.v1.DeploymentSpec`), as kube's generated
//! defaulters walk the Go value: so rules about a struct (the registry's defaults) are data keyed by
//! its name, wherever it appears (a Pod's containers and every template's alike).

use serde_json::{Map, Value};

use super::schema_types::{find, message, package_for, Kind, Rep, Shape, INLINE, POINTER};

/// Nesting deeper than any Kubernetes type has; deeper parts are not visited.
const MAX_DEPTH: usize = 100;

/// The prefix of every built-in struct's proto name, left out of the names handed to visitors.
const API_PREFIX: &str = "k8s.io.api.";

/// A visitor: a struct's name, its object, and where in the whole object it is.
pub type Visitor<'a> = dyn FnMut(&str, &mut Map<String, Value>, &Path) + 'a;

/// One step from an object to what it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(&'static str),
    Index(usize),
    Key(String),
}

/// Where a struct is in the object being walked, kept as steps and written out only when asked (a
/// validation error names it; most visits never do).
#[derive(Debug, Default)]
pub struct Path(Vec<Step>);

impl Path {
    /// As kube's field paths read: `spec.template.spec.containers[0].ports[1]`, a map entry `[key]`.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for step in &self.0 {
            match step {
                Step::Field(f) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(f);
                }
                Step::Index(i) => out.push_str(&format!("[{i}]")),
                Step::Key(k) => out.push_str(&format!("[{k}]")),
            }
        }
        out
    }

    /// Whether the path passes through `field`.
    pub fn has(&self, field: &str) -> bool {
        self.0.iter().any(|s| matches!(s, Step::Field(f) if *f == field))
    }

    /// The path of `field` beside the struct here: kube reports some structs' fields under another
    /// name than the field holding them (a GCE disk's, under `persistentDisk`).
    pub fn sibling(&self, field: &str) -> String {
        let mut steps = self.0.clone();
        steps.pop();
        Path(steps).child(field)
    }

    /// The path of `field` of the struct here.
    pub fn child(&self, field: &str) -> String {
        let here = self.render();
        if here.is_empty() {
            field.to_string()
        } else {
            format!("{here}.{field}")
        }
    }
}

/// The JSON names of a struct's fields in its Go order, for a name as visitors are given it
/// (`core.v1.VolumeSource`); none for a name the schema does not hold.
pub fn field_names(name: &str) -> Vec<&'static str> {
    find(&format!("{API_PREFIX}{name}")).map(|i| message(i).fields.iter().map(|f| f.json).collect()).unwrap_or_default()
}

/// Hand every struct in `obj` (an object of `api_version`/`kind`) to `visit`, a struct before what it
/// holds, so that what a visitor adds is visited too. A struct Go holds by value (not through a
/// pointer) is there even when the JSON leaves it out or sends null, as Go decodes it, so it is made
/// empty first (as Go writes it back): at most `make` of them, a bound for the caller to size to the
/// object. Does nothing for kinds without a schema.
pub fn visit_structs(api_version: &str, kind: &str, obj: &mut Value, make: usize, visit: &mut Visitor<'_>) {
    let Some(package) = package_for(api_version) else { return };
    let Some(index) = find(&format!("{package}.{kind}")) else { return };
    let mut walk = Walk { make, visit, path: Path::default() };
    walk.value(index, obj, 0);
}

struct Walk<'v, 'a> {
    make: usize,
    visit: &'v mut Visitor<'a>,
    path: Path,
}

impl Walk<'_, '_> {
    fn value(&mut self, index: u16, v: &mut Value, depth: usize) {
        let msg = message(index);
        if msg.shape != Shape::Object || depth > MAX_DEPTH {
            return;
        }
        let Value::Object(map) = v else { return };
        self.fields(index, map, depth);
    }

    fn fields(&mut self, index: u16, map: &mut Map<String, Value>, depth: usize) {
        let msg = message(index);
        for f in msg.fields {
            let Kind::Msg(child) = f.kind else { continue };
            let by_value =
                f.rep == Rep::S && !f.has(POINTER) && !f.has(INLINE) && message(child).shape == Shape::Object;
            if by_value && map.get(f.json).is_none_or(Value::is_null) && self.make > 0 {
                self.make -= 1;
                map.insert(f.json.to_string(), Value::Object(Map::new()));
            }
        }
        (self.visit)(msg.name.strip_prefix(API_PREFIX).unwrap_or(msg.name), map, &self.path);
        for f in msg.fields {
            let Kind::Msg(child) = f.kind else { continue };
            if f.has(INLINE) {
                // An embedded struct's fields are this object's: it is visited with the same map.
                if message(child).shape == Shape::Object && depth < MAX_DEPTH {
                    self.fields(child, map, depth + 1);
                }
                continue;
            }
            let Some(v) = map.get_mut(f.json) else { continue };
            self.path.0.push(Step::Field(f.json));
            match (f.rep, v) {
                (Rep::S, v) => self.value(child, v, depth + 1),
                (Rep::L, Value::Array(items)) => {
                    for (i, item) in items.iter_mut().enumerate() {
                        self.path.0.push(Step::Index(i));
                        self.value(child, item, depth + 1);
                        self.path.0.pop();
                    }
                }
                (Rep::M, Value::Object(entries)) => {
                    for (k, item) in entries.iter_mut() {
                        self.path.0.push(Step::Key(k.clone()));
                        self.value(child, item, depth + 1);
                        self.path.0.pop();
                    }
                }
                _ => {}
            }
            self.path.0.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_struct_is_visited_by_its_name_inline_ones_with_their_holder() {
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"template": {"spec": {
            "containers": [{"name": "a", "ports": [{"containerPort": 80}]}, {"name": "b"}],
            "volumes": [{"name": "v", "configMap": {"name": "c"}}]}}}});
        let mut seen = Vec::new();
        let mut paths = Vec::new();
        visit_structs("apps/v1", "Deployment", &mut d, 100, &mut |name, map, path| {
            seen.push(name.to_string());
            if name == "core.v1.ContainerPort" {
                paths.push(path.render());
            }
            if name == "core.v1.ContainerPort" {
                map.insert("protocol".into(), json!("TCP"));
            }
        });
        for want in [
            "apps.v1.Deployment",
            "apps.v1.DeploymentSpec",
            "core.v1.PodSpec",
            "core.v1.VolumeSource",
            "core.v1.ConfigMapVolumeSource",
        ] {
            assert!(seen.iter().any(|s| s == want), "{want} in {seen:?}");
        }
        assert_eq!(seen.iter().filter(|s| *s == "core.v1.Container").count(), 2);
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(paths, ["spec.template.spec.containers[0].ports[0]"]);
        let mut cr = json!({"apiVersion": "example.com/v1", "kind": "Widget"});
        visit_structs("example.com/v1", "Widget", &mut cr, 100, &mut |_, _, _| panic!("no schema, no visit"));
        // A struct held by value is made when absent or null; one held through a pointer is not.
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment", "spec": null});
        visit_structs("apps/v1", "Deployment", &mut d, 100, &mut |_, _, _| {});
        assert!(d["spec"]["template"]["spec"].is_object() && d["metadata"].is_object(), "{d}");
        assert!(d["spec"].get("selector").is_none() && d["spec"].get("strategy").is_some(), "{d}");
        let mut d = json!({"apiVersion": "apps/v1", "kind": "Deployment"});
        visit_structs("apps/v1", "Deployment", &mut d, 1, &mut |_, _, _| {});
        assert!(d.get("metadata").is_some() && d.get("spec").is_none(), "no more than allowed: {d}");
    }
}
