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

/// What a request's `Impersonate-*` headers ask for (kube-apiserver's user impersonation).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// `Impersonate-Group`, each.
    pub groups: Vec<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
    /// `Impersonate-Extra-<key>` header names (their values are not used by kgate).
    pub extras: Vec<String>,
}

impl Impersonation {
    /// Read the headers; `None` when the request impersonates nobody.
    pub fn from_headers(headers: &http::HeaderMap) -> Result<Option<Self>, String> {
        let mut imp = Impersonation::default();
        for (name, value) in headers {
            let n = name.as_str();
            let v = || value.to_str().map(str::to_string).map_err(|_| format!("invalid {n} header"));
            match n {
                // The first of several, as Go's `Header.Get` reads them.
                "impersonate-user" if imp.user.is_none() => imp.user = Some(v()?),
                "impersonate-group" => imp.groups.push(v()?),
                "impersonate-uid" if imp.uid.is_none() => imp.uid = Some(v()?),
                _ if n.starts_with("impersonate-extra-") => {
                    imp.extras.push(n["impersonate-extra-".len()..].to_string())
                }
                _ => {}
            }
        }
        if imp == Impersonation::default() {
            return Ok(None);
        }
        if imp.user.is_none() {
            return Err("requested impersonation of groups, a uid or extras without impersonating a user".into());
        }
        Ok(Some(imp))
    }

    /// What the caller must be allowed to `impersonate`: (group, resource, namespace, name), checked in
    /// the order kube-apiserver checks them.
    pub fn checks(&self) -> Vec<(&'static str, String, Option<String>, String)> {
        let mut out = Vec::new();
        if let Some(user) = &self.user {
            match service_account_of(user) {
                Some((ns, name)) => out.push(("", "serviceaccounts".to_string(), Some(ns), name)),
                None => out.push(("", "users".to_string(), None, user.clone())),
            }
        }
        for g in &self.groups {
            out.push(("", "groups".to_string(), None, g.clone()));
        }
        if let Some(uid) = &self.uid {
            out.push(("authentication.k8s.io", "uids".to_string(), None, uid.clone()));
        }
        for key in &self.extras {
            out.push(("authentication.k8s.io", format!("userextras/{key}"), None, String::new()));
        }
        out
    }

    /// The identity the request then acts as: the named user and groups, plus the groups
    /// kube-apiserver adds (`system:authenticated`, and a ServiceAccount's own groups).
    pub fn identity(&self) -> Identity {
        let user = self.user.clone().unwrap_or_default();
        let mut groups = self.groups.clone();
        if let Some((ns, _)) = service_account_of(&user) {
            groups.push("system:serviceaccounts".into());
            groups.push(format!("system:serviceaccounts:{ns}"));
        }
        Identity::from_cert(user, groups)
    }
}

/// `system:serviceaccount:<ns>:<name>` split.
fn service_account_of(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix("system:serviceaccount:")?;
    let (ns, name) = rest.split_once(':')?;
    Some((ns.to_string(), name.to_string()))
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
    #[test]
    fn impersonation_headers_become_checks_and_an_identity() {
        let mut h = http::HeaderMap::new();
        assert_eq!(super::Impersonation::from_headers(&h), Ok(None));
        h.append("impersonate-group", "devs".parse().unwrap());
        assert!(super::Impersonation::from_headers(&h).is_err(), "groups without a user");
        h.append("impersonate-user", "system:serviceaccount:team:bot".parse().unwrap());
        let imp = super::Impersonation::from_headers(&h).unwrap().unwrap();
        let checks = imp.checks();
        assert_eq!(checks[0], ("", "serviceaccounts".into(), Some("team".into()), "bot".into()));
        assert_eq!(checks[1], ("", "groups".into(), None, "devs".into()));
        let id = imp.identity();
        assert_eq!(id.user, "system:serviceaccount:team:bot");
        for g in ["devs", "system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"] {
            assert!(id.groups.iter().any(|x| x == g), "{g}");
        }
    }

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
