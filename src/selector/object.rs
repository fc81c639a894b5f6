//! Label selectors written as objects (`metav1.LabelSelector`: `matchLabels`, `matchExpressions`), as
//! ClusterRole aggregation and a pod's eviction match them.

use serde_json::Value;
use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Debug, Clone)]
enum Requirement {
    Equals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

/// A parsed selector; all requirements must hold.
#[derive(Debug, Clone)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// Parses a LabelSelector object. `None` when it is invalid, as `LabelSelectorAsSelector` would reject it
    /// (unknown operator, In/NotIn without values, Exists/DoesNotExist with values, non-string values);
    /// kube's callers (the aggregation controller, the eviction) then select nothing with it, and so do
    /// kgate's. An empty selector `{}` matches everything, as in kube.
    pub fn parse(v: &Value) -> Option<Selector> {
        let obj = v.as_object()?;
        let mut requirements = Vec::new();
        match obj.get("matchLabels") {
            None | Some(Value::Null) => {}
            Some(Value::Object(labels)) => {
                for (k, v) in labels {
                    requirements.push(Requirement::Equals(k.clone(), v.as_str()?.to_owned()));
                }
            }
            Some(_) => return None,
        }
        match obj.get("matchExpressions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(exprs)) => {
                for expr in exprs {
                    requirements.push(parse_expression(expr)?);
                }
            }
            Some(_) => return None,
        }
        Some(Selector { requirements })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::In(k, vals) => labels.get(k).is_some_and(|v| vals.contains(v)),
            Requirement::NotIn(k, vals) => labels.get(k).is_none_or(|v| !vals.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
        })
    }
}

fn parse_expression(expr: &Value) -> Option<Requirement> {
    let obj = expr.as_object()?;
    let key = obj.get("key")?.as_str()?.to_owned();
    let values: Vec<String> = match obj.get("values") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items.iter().map(|v| v.as_str().map(str::to_owned)).collect::<Option<_>>()?,
        Some(_) => return None,
    };
    match obj.get("operator")?.as_str()? {
        "In" if !values.is_empty() => Some(Requirement::In(key, values)),
        "NotIn" if !values.is_empty() => Some(Requirement::NotIn(key, values)),
        "Exists" if values.is_empty() => Some(Requirement::Exists(key)),
        "DoesNotExist" if values.is_empty() => Some(Requirement::DoesNotExist(key)),
        _ => None,
    }
}
