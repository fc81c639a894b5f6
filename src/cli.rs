//! The client side of the `kgate` command: `cluster create|list|delete` and `kubeconfig`, spoken to a
//! running server over its API with the admin kubeconfig.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use serde_json::{json, Value};

/// Failures of a client command, each printed as one line.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig {path}: {why}")]
    Kubeconfig {
        /// Its path.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The server could not be reached.
    #[error("talking to {url}: {source}")]
    Http {
        /// The URL.
        url: String,
        /// The failure.
        #[source]
        source: reqwest::Error,
    },
    /// The server refused.
    #[error("{0}")]
    Api(String),
    /// A bad argument.
    #[error("{0}")]
    Usage(String),
    /// Waiting ran out of time.
    #[error("timed out waiting for {0}")]
    Timeout(String),
}

/// An admin connection to a running kgate, from a kubeconfig.
pub struct Admin {
    client: reqwest::Client,
    /// Base URL without any `/clusters/...` path.
    pub base: String,
    /// The CA clients must trust (PEM).
    pub ca_pem: String,
}

/// The kubeconfig to use: the flag, then `$KUBECONFIG`, then `./kgate-data/admin.kubeconfig`.
pub fn kubeconfig_path(flag: Option<PathBuf>) -> PathBuf {
    flag.or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("./kgate-data/admin.kubeconfig"))
}

fn b64(v: &Value) -> Option<String> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(v.as_str()?).ok()?;
    String::from_utf8(bytes).ok()
}

impl Admin {
    /// Read the kubeconfig's current context (certificate credentials and CA data).
    pub fn from_kubeconfig(path: &Path) -> Result<Admin, CliError> {
        let bad = |why: &str| CliError::Kubeconfig { path: path.to_path_buf(), why: why.to_string() };
        let text = std::fs::read_to_string(path).map_err(|e| bad(&e.to_string()))?;
        let kc: Value = serde_yaml_ng::from_str(&text).map_err(|e| bad(&e.to_string()))?;
        let ctx_name = kc["current-context"].as_str().ok_or_else(|| bad("no current-context"))?;
        let find = |list: &str, name: &str| -> Option<Value> {
            kc[list].as_array()?.iter().find(|e| e["name"].as_str() == Some(name)).cloned()
        };
        let ctx = find("contexts", ctx_name).ok_or_else(|| bad("current context not found"))?;
        let cluster = find("clusters", ctx["context"]["cluster"].as_str().unwrap_or(""))
            .ok_or_else(|| bad("context's cluster not found"))?;
        let user = find("users", ctx["context"]["user"].as_str().unwrap_or(""))
            .ok_or_else(|| bad("context's user not found"))?;
        let server = cluster["cluster"]["server"].as_str().ok_or_else(|| bad("no server"))?;
        let base = match server.find("/clusters/") {
            Some(i) => server[..i].to_string(),
            None => server.trim_end_matches('/').to_string(),
        };
        let ca_pem = b64(&cluster["cluster"]["certificate-authority-data"])
            .ok_or_else(|| bad("no certificate-authority-data"))?;
        let cert = b64(&user["user"]["client-certificate-data"]).ok_or_else(|| bad("no client-certificate-data"))?;
        let key = b64(&user["user"]["client-key-data"]).ok_or_else(|| bad("no client-key-data"))?;
        let ca = reqwest::Certificate::from_pem(ca_pem.as_bytes()).map_err(|e| bad(&e.to_string()))?;
        let identity =
            reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).map_err(|e| bad(&e.to_string()))?;
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(ca)
            .identity(identity)
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| bad(&e.to_string()))?;
        Ok(Admin { client, base, ca_pem })
    }

    /// Send a request; returns status and JSON body.
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> Result<(u16, Value), CliError> {
        let url = format!("{}{path}", self.base);
        let mut r = self.client.request(method, &url);
        if let Some(b) = body {
            r = r.json(b);
        }
        let resp = r.send().await.map_err(|source| CliError::Http { url: url.clone(), source })?;
        let status = resp.status().as_u16();
        let v = resp.json::<Value>().await.unwrap_or(Value::Null);
        Ok((status, v))
    }

    /// Create unless it exists (409 is fine: idempotent).
    async fn ensure(&self, path: &str, obj: Value) -> Result<(), CliError> {
        match self.call(reqwest::Method::POST, path, Some(&obj)).await? {
            (200..=299, _) | (409, _) => Ok(()),
            (_, st) => Err(api_error(&st)),
        }
    }
}

fn api_error(status: &Value) -> CliError {
    CliError::Api(format!("error from server: {}", status["message"].as_str().unwrap_or("unknown error")))
}

const LC_PATH: &str = "/apis/tenancy.kgate.dev/v1alpha1/logicalclusters";

/// `kgate cluster create NAME [--shard SHARD]`: create the LogicalCluster (on that shard, else where
/// the server places it) and wait until it is Ready.
pub async fn cluster_create(admin: &Admin, name: &str, shard: Option<&str>) -> Result<String, CliError> {
    let mut lc =
        json!({"apiVersion": "tenancy.kgate.dev/v1alpha1", "kind": "LogicalCluster", "metadata": {"name": name}});
    if let Some(shard) = shard {
        lc["spec"] = json!({"shard": shard});
    }
    match admin.call(reqwest::Method::POST, LC_PATH, Some(&lc)).await? {
        (201, _) => {}
        (_, st) => return Err(api_error(&st)),
    }
    for _ in 0..100 {
        let (code, obj) = admin.call(reqwest::Method::GET, &format!("{LC_PATH}/{name}"), None).await?;
        if code == 200 && obj["status"]["phase"] == "Ready" {
            return Ok(format!("logicalcluster/{name} created: {}/clusters/{name}", admin.base));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(CliError::Timeout(format!("logicalcluster/{name} to be Ready")))
}

/// `kgate cluster list`: a table of clusters and their phases.
pub async fn cluster_list(admin: &Admin) -> Result<String, CliError> {
    let (code, list) = admin.call(reqwest::Method::GET, LC_PATH, None).await?;
    if code != 200 {
        return Err(api_error(&list));
    }
    let mut out = format!("{:<40} {:<12} {:<16} {}\n", "NAME", "PHASE", "SHARD", "CREATED");
    for item in list["items"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "{:<40} {:<12} {:<16} {}\n",
            item["metadata"]["name"].as_str().unwrap_or(""),
            item["status"]["phase"].as_str().unwrap_or(""),
            crate::shard::of(item).unwrap_or(crate::shard::DEFAULT),
            item["metadata"]["creationTimestamp"].as_str().unwrap_or("")
        ));
    }
    Ok(out)
}

/// How long `kgate cluster delete --wait` waits for the purge of a cluster's objects (and `move
/// --wait` for a move).
const DELETE_WAIT: Duration = Duration::from_secs(600);

/// `kgate cluster delete NAME [--wait]`. The cluster stops serving at once; with `--wait`, return only
/// when the LogicalCluster is gone, which is when every object of the cluster has been purged.
pub async fn cluster_delete(admin: &Admin, name: &str, wait: bool) -> Result<String, CliError> {
    let path = format!("{LC_PATH}/{name}");
    match admin.call(reqwest::Method::DELETE, &path, None).await? {
        (200..=299, _) => {}
        (_, st) => return Err(api_error(&st)),
    }
    if !wait {
        return Ok(format!("logicalcluster/{name} deleted (its objects are being purged)"));
    }
    let deadline = tokio::time::Instant::now() + DELETE_WAIT;
    while tokio::time::Instant::now() < deadline {
        match admin.call(reqwest::Method::GET, &path, None).await? {
            (404, _) => return Ok(format!("logicalcluster/{name} deleted")),
            (200, _) => {}
            (_, st) => return Err(api_error(&st)),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(CliError::Timeout(format!("logicalcluster/{name} to be purged and gone")))
}

/// `kgate cluster move NAME --to SHARD [--wait]`: ask for the cluster's objects to be moved (a new
/// `spec.shard`); with `--wait`, return once they are there (`status.shard` gone). The cluster answers
/// 503 while it moves.
pub async fn cluster_move(admin: &Admin, name: &str, to: &str, wait: bool) -> Result<String, CliError> {
    let path = format!("{LC_PATH}/{name}");
    let (code, mut lc) = admin.call(reqwest::Method::GET, &path, None).await?;
    if code != 200 {
        return Err(api_error(&lc));
    }
    if crate::shard::of(&lc).unwrap_or(crate::shard::DEFAULT) == to && crate::shard::moving_to(&lc).is_none() {
        return Ok(format!("logicalcluster/{name} is on shard {to:?} already"));
    }
    // A replace at the resourceVersion read: a move asked for meanwhile is not overwritten.
    lc["spec"]["shard"] = json!(to);
    match admin.call(reqwest::Method::PUT, &path, Some(&lc)).await? {
        (200, _) => {}
        (_, st) => return Err(api_error(&st)),
    }
    if !wait {
        return Ok(format!("logicalcluster/{name} moving to shard {to:?} (it answers 503 until it is there)"));
    }
    let deadline = tokio::time::Instant::now() + DELETE_WAIT;
    while tokio::time::Instant::now() < deadline {
        let (code, obj) = admin.call(reqwest::Method::GET, &path, None).await?;
        match code {
            200 if crate::shard::moving_to(&obj).is_none() => {
                return Ok(format!("logicalcluster/{name} moved to shard {to:?}"));
            }
            200 => {}
            _ => return Err(api_error(&obj)),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(CliError::Timeout(format!("logicalcluster/{name} to be moved to shard {to:?}")))
}

/// Parse `24h`, `30m`, `90s`, `7d` (or plain seconds).
pub fn parse_duration(s: &str) -> Result<i64, CliError> {
    let bad = || CliError::Usage(format!("invalid duration {s:?}: use e.g. 30m, 24h, 7d"));
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().map_err(|_| bad())?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(bad()),
    };
    Ok(n * mult)
}

/// What `kgate kubeconfig` is asked for.
pub struct KubeconfigRequest<'a> {
    /// Logical cluster.
    pub cluster: &'a str,
    /// Namespace of the ServiceAccount.
    pub namespace: &'a str,
    /// ServiceAccount name.
    pub service_account: &'a str,
    /// `admin`, `edit` or `view`.
    pub role: &'a str,
    /// Token lifetime in seconds.
    pub seconds: i64,
    /// Server URL for the kubeconfig (default: the admin kubeconfig's), without `/clusters/...`.
    pub server: Option<&'a str>,
}

/// The ClusterRole a `--role` binds, and the ClusterRoles an account may already be bound to for a
/// kubeconfig of that role not to carry more than it says (the role and those it includes).
pub fn role_of(role: &str) -> Result<(&'static str, &'static [&'static str]), CliError> {
    Ok(match role {
        // A team's admin owns its whole logical cluster, namespaces included.
        "admin" => ("cluster-admin", &["cluster-admin", "admin", "edit", "view"]),
        "edit" => ("edit", &["edit", "view"]),
        "view" => ("view", &["view"]),
        other => return Err(CliError::Usage(format!("--role must be admin, edit or view, not {other:?}"))),
    })
}

/// The ServiceAccount a kubeconfig of `role` uses when none is named: one per role, so a view
/// kubeconfig never shares an account with an admin one.
pub fn default_service_account(role: &str) -> String {
    format!("kgate-{role}")
}

/// The bindings of `cluster` whose subjects name ServiceAccount `ns/sa`, as (kind/name, role). (Bindings
/// of groups every account is in, such as `system:serviceaccounts`, give every account their rights:
/// they are the platform's choice, not this account's, and are not counted.)
async fn bindings_of(admin: &Admin, cluster: &str, ns: &str, sa: &str) -> Result<Vec<(String, String)>, CliError> {
    let mut out = Vec::new();
    for (kind, plural) in [("ClusterRoleBinding", "clusterrolebindings"), ("RoleBinding", "rolebindings")] {
        let path = format!("/clusters/{cluster}/apis/rbac.authorization.k8s.io/v1/{plural}");
        let (code, list) = admin.call(reqwest::Method::GET, &path, None).await?;
        if code != 200 {
            return Err(api_error(&list));
        }
        for b in list["items"].as_array().into_iter().flatten() {
            let binding_ns = b["metadata"]["namespace"].as_str().unwrap_or_default();
            let names_sa = b["subjects"].as_array().into_iter().flatten().any(|s| {
                let subject_ns = s["namespace"].as_str().filter(|n| !n.is_empty()).unwrap_or(binding_ns);
                s["kind"] == "ServiceAccount" && s["name"] == sa && subject_ns == ns
            });
            if names_sa {
                let name = b["metadata"]["name"].as_str().unwrap_or_default();
                let at = if binding_ns.is_empty() { String::new() } else { format!(" in namespace {binding_ns}") };
                // Only the ClusterRoles of the roles count as within one; a Role is whatever it holds.
                let role = match b["roleRef"]["kind"].as_str() {
                    Some("ClusterRole") => b["roleRef"]["name"].as_str().unwrap_or_default().to_string(),
                    _ => format!("Role {}", b["roleRef"]["name"].as_str().unwrap_or_default()),
                };
                out.push((format!("{kind} {name}{at}"), role));
            }
        }
    }
    Ok(out)
}

/// `kgate kubeconfig`: make sure the ServiceAccount and its binding exist, issue a token, and render a
/// kubeconfig for the cluster. Refused when the account already holds more than the role through other
/// bindings: the kubeconfig would carry those rights too.
pub async fn kubeconfig(admin: &Admin, req: &KubeconfigRequest<'_>) -> Result<String, CliError> {
    let (cluster_role, within) = role_of(req.role)?;
    let (c, ns, sa) = (req.cluster, req.namespace, req.service_account);
    let beyond: Vec<String> = bindings_of(admin, c, ns, sa)
        .await?
        .into_iter()
        .filter(|(_, role)| !within.contains(&role.as_str()))
        .map(|(binding, role)| format!("{role} (through {binding})"))
        .collect();
    if !beyond.is_empty() {
        return Err(CliError::Usage(format!(
            "ServiceAccount {ns}/{sa} in cluster {c} already holds more than --role {}: {}; a kubeconfig for it \
             would carry those rights too. Name another --service-account (or pass --unique), or revoke the \
             account first (kgate kubeconfig --cluster {c} --service-account {ns}/{sa} --revoke)",
            req.role,
            beyond.join(", ")
        )));
    }
    admin
        .ensure(
            &format!("/clusters/{c}/api/v1/namespaces/{ns}/serviceaccounts"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa}}),
        )
        .await?;
    let binding = format!("kgate:{ns}:{sa}:{}", req.role);
    admin
        .ensure(
            &format!("/clusters/{c}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": binding},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
                "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
            }),
        )
        .await?;
    let tr = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": req.seconds}});
    let (code, resp) = admin
        .call(
            reqwest::Method::POST,
            &format!("/clusters/{c}/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token"),
            Some(&tr),
        )
        .await?;
    if code != 201 {
        return Err(api_error(&resp));
    }
    let token = resp["status"]["token"].as_str().ok_or_else(|| CliError::Api("no token in the answer".into()))?;
    let server = format!("{}/clusters/{c}", req.server.unwrap_or(&admin.base).trim_end_matches('/'));
    crate::pki::kubeconfig(
        &server,
        c,
        &admin.ca_pem,
        &crate::pki::Credentials::Token(token.to_string()),
        Some("default"),
    )
    .map_err(|e| CliError::Api(e.to_string()))
}

/// `kgate kubeconfig --revoke`: delete the ServiceAccount, which ends every token issued for it (a token
/// is valid only while its account exists with the same uid), and the bindings kgate made for it.
pub async fn revoke(admin: &Admin, cluster: &str, ns: &str, sa: &str) -> Result<String, CliError> {
    let path = format!("/clusters/{cluster}/api/v1/namespaces/{ns}/serviceaccounts/{sa}");
    match admin.call(reqwest::Method::DELETE, &path, None).await? {
        (200..=299, _) => {}
        (404, _) => return Err(CliError::Api(format!("no ServiceAccount {ns}/{sa} in cluster {cluster}"))),
        (_, st) => return Err(api_error(&st)),
    }
    for role in ["admin", "edit", "view"] {
        let binding =
            format!("/clusters/{cluster}/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/kgate:{ns}:{sa}:{role}");
        match admin.call(reqwest::Method::DELETE, &binding, None).await? {
            (200..=299, _) | (404, _) => {}
            (_, st) => return Err(api_error(&st)),
        }
    }
    Ok(format!("serviceaccount {ns}/{sa} in cluster {cluster} deleted: every kubeconfig made for it is revoked"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("24h").unwrap(), 86400);
        assert_eq!(parse_duration("30m").unwrap(), 1800);
        assert_eq!(parse_duration("7d").unwrap(), 604800);
        assert_eq!(parse_duration("90").unwrap(), 90);
        assert!(parse_duration("1w").is_err());
        assert!(parse_duration("h").is_err());
    }
}
