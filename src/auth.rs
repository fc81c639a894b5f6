//! Who is calling: identities from verified client certificates, and the authorization decision for a
//! request in one logical cluster.

use serde_json::{json, Value};

/// The group that may do everything everywhere.
pub const MASTERS: &str = "system:masters";

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// User name (certificate CN).
    pub user: String,
    /// Groups (certificate O values), plus `system:authenticated`.
    pub groups: Vec<String>,
}

impl Identity {
    /// An identity from a client certificate's subject.
    pub fn from_cert(user: String, mut groups: Vec<String>) -> Self {
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        Identity { user, groups }
    }

    /// Member of `system:masters`.
    pub fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == MASTERS)
    }

    /// `status.userInfo` of a SelfSubjectReview.
    pub fn user_info(&self) -> Value {
        json!({"username": self.user, "groups": self.groups})
    }
}

/// Read CN and O values from a DER client certificate already verified by the TLS layer.
pub fn identity_from_der(der: &[u8]) -> Option<Identity> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let user = subject.iter_common_name().next()?.as_str().ok()?.to_string();
    let groups = subject.iter_organization().filter_map(|o| o.as_str().ok().map(str::to_string)).collect();
    Some(Identity::from_cert(user, groups))
}

/// The attributes of a request that authorization looks at.
#[derive(Debug, Clone)]
pub struct Attributes<'a> {
    /// Kubernetes verb (`get`, `list`, `watch`, `create`, ...).
    pub verb: &'a str,
    /// API group.
    pub group: &'a str,
    /// Resource plural.
    pub resource: &'a str,
    /// Subresource.
    pub subresource: Option<&'a str>,
    /// Namespace.
    pub namespace: Option<&'a str>,
    /// Object name.
    pub name: Option<&'a str>,
}

/// `configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "default"`.
pub fn forbidden_message(who: &Identity, a: &Attributes) -> String {
    let res = match a.subresource {
        Some(s) => format!("{}/{s}", a.resource),
        None => a.resource.to_string(),
    };
    let subject = match a.name {
        Some(n) => format!("{res} \"{n}\""),
        None => res.clone(),
    };
    let scope = match a.namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".to_string(),
    };
    format!(
        "{subject} is forbidden: User \"{}\" cannot {} resource \"{res}\" in API group \"{}\"{scope}",
        who.user, a.verb, a.group
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_wording_and_groups() {
        let admin = Identity::from_cert("admin".into(), vec![MASTERS.into()]);
        let alice = Identity::from_cert("alice".into(), vec![]);
        assert!(admin.is_master() && !alice.is_master());
        let a = Attributes {
            verb: "list",
            group: "",
            resource: "configmaps",
            subresource: None,
            namespace: Some("default"),
            name: None,
        };
        assert_eq!(
            forbidden_message(&alice, &a),
            "configmaps is forbidden: User \"alice\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"default\""
        );
        assert!(alice.groups.contains(&"system:authenticated".to_string()));
    }
}
