//! Server configuration: one documented struct with one `Default`, validated before a port is bound.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::storage::etcd::EtcdTls;

/// Everything `kgate serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Address to listen on (HTTPS, HTTP/2 and HTTP/1.1).
    pub listen: SocketAddr,
    /// The address published to every logical cluster as `default/kubernetes` (kube-apiserver's
    /// `--advertise-address`); `None`: the listen address (loopback when it is unspecified).
    pub advertise_address: Option<std::net::IpAddr>,
    /// Where the embedded store, PKI and admin kubeconfig live.
    pub data_dir: PathBuf,
    /// etcd endpoints; empty means the embedded store. This is the default shard, which holds root.
    pub etcd_servers: Vec<String>,
    /// More etcd clusters to place logical clusters on (`--shard NAME=URL[,URL...]`), with the same
    /// prefix and TLS options as `etcd_servers`.
    pub shards: Vec<ShardConfig>,
    /// Key prefix of every object.
    pub etcd_prefix: String,
    /// TLS material for etcd.
    pub etcd_tls: EtcdTls,
    /// Serving certificate and key to use instead of the generated ones.
    pub tls_cert_file: Option<PathBuf>,
    /// See `tls_cert_file`.
    pub tls_key_file: Option<PathBuf>,
    /// How often history older than one interval is compacted (kube-apiserver: 5 minutes).
    pub compaction_interval: Duration,
    /// LogicalCluster manifests applied at start (created or updated, never deleted); `None`: none.
    /// `kgate serve` defaults it to `./tenants` when that directory exists; the library default stays
    /// `None` so that a server never picks up files from whatever directory it happens to run in.
    pub tenants_dir: Option<PathBuf>,
    /// Requests and watches in flight, server-wide and per logical cluster.
    pub inflight: crate::http::inflight::Limits,
    /// Open connections and their deadlines.
    pub connections: ConnLimits,
    /// Bytes that answers being sent may hold, server-wide and per logical cluster.
    pub bytes: crate::budget::Limits,
    /// The audiences a ServiceAccount token must name one of to authenticate to the API (kube-apiserver's
    /// `--api-audiences`); TokenRequests without audiences get these.
    pub api_audiences: Vec<String>,
    /// The audit log: its policy file and where events go (`--audit-policy-file`, `--audit-log-*`).
    pub audit: Option<AuditConfig>,
    /// How many of the busiest logical clusters root's `/metrics` names (see `usage`).
    pub metrics_top_clusters: usize,
    /// Per-cluster accounting: request figures (`usage`), store usage on each LogicalCluster and the
    /// `spec.limits` that depend on it (`registry::footprint`). On unless `--usage-accounting=false`.
    pub usage_accounting: bool,
}

/// One `--shard NAME=URL[,URL...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardConfig {
    /// What LogicalClusters name it by in `spec.shard`.
    pub name: String,
    /// Its etcd endpoints.
    pub endpoints: Vec<String>,
}

impl std::str::FromStr for ShardConfig {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (name, urls) = s.split_once('=').ok_or_else(|| format!("{s:?}: expected NAME=URL[,URL...]"))?;
        let endpoints: Vec<String> = urls.split(',').filter(|u| !u.is_empty()).map(str::to_string).collect();
        Ok(ShardConfig { name: name.to_string(), endpoints })
    }
}

/// Where the audit policy is and how its log is written.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// An `audit.k8s.io/v1` Policy (YAML or JSON).
    pub policy_file: PathBuf,
    /// The log file (`-` for stdout) and its rotation.
    pub log: crate::audit::LogOptions,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: "127.0.0.1:6443".parse().expect("static address"),
            data_dir: PathBuf::from("./kgate-data"),
            etcd_servers: Vec::new(),
            shards: Vec::new(),
            etcd_prefix: "/registry".into(),
            etcd_tls: EtcdTls::default(),
            tls_cert_file: None,
            tls_key_file: None,
            advertise_address: None,
            compaction_interval: Duration::from_secs(300),
            tenants_dir: None,
            inflight: Default::default(),
            connections: Default::default(),
            bytes: Default::default(),
            api_audiences: crate::token::default_audiences(),
            audit: None,
            metrics_top_clusters: crate::usage::DEFAULT_TOP,
            usage_accounting: true,
        }
    }
}

/// How many connections may be open and how long each may take for what (see `http::conn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Open connections at most (0: no limit); one more is closed as soon as it is accepted.
    pub max: usize,
    /// Deadlines for the handshake, the first request, idleness and a client that stopped reading.
    pub timeouts: Timeouts,
}

impl Default for ConnLimits {
    /// Ten thousand connections: each holds a few dozen KiB of TLS and HTTP buffers when idle, and a
    /// kubelet-free control plane sees one or two per client.
    fn default() -> Self {
        ConnLimits { max: 10_000, timeouts: Timeouts::default() }
    }
}

/// How long a connection may go without doing what it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// From accept to a finished TLS handshake.
    pub handshake: Duration,
    /// From the handshake to the first request's headers (HTTP/2: its preface, settings and first
    /// HEADERS; HTTP/1.1: the request line and headers).
    pub first_request: Duration,
    /// With no request in flight, after the first.
    pub idle: Duration,
    /// With response bytes waiting for the client and none of them taken.
    pub stalled: Duration,
}

impl Default for Timeouts {
    /// Go's HTTP/2 preface timeout (10 s), kube-apiserver's `IdleTimeout` (90 s); kube-apiserver has no
    /// write timeout, so a stalled client there holds its watch until the watch times out (30 to 60
    /// minutes): a minute of not reading is far past what any client that still reads takes.
    fn default() -> Self {
        Timeouts {
            handshake: Duration::from_secs(10),
            first_request: Duration::from_secs(10),
            idle: Duration::from_secs(90),
            stalled: Duration::from_secs(60),
        }
    }
}

/// A configuration that cannot work.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The key prefix must be an absolute key path.
    #[error("--etcd-prefix must start with '/' and not end with '/': {0:?}")]
    Prefix(String),
    /// Both or neither of the TLS files.
    #[error("--tls-cert-file and --tls-key-file must be given together")]
    TlsPair,
    /// An etcd endpoint that is not a URL.
    #[error("--etcd-servers: {0:?} is not an http(s):// URL")]
    Endpoint(String),
    /// A shard whose name or endpoints cannot work.
    #[error("--shard {0}")]
    Shard(String),
    /// A tenants directory that is not a directory.
    #[error("--tenants-dir: {} is not a directory", .0.display())]
    TenantsDir(PathBuf),
}

impl Config {
    /// Check the configuration.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.etcd_prefix.starts_with('/') || self.etcd_prefix.ends_with('/') {
            return Err(ConfigError::Prefix(self.etcd_prefix.clone()));
        }
        if self.tls_cert_file.is_some() != self.tls_key_file.is_some() {
            return Err(ConfigError::TlsPair);
        }
        if let Some(bad) = self.etcd_servers.iter().find(|e| !(e.starts_with("http://") || e.starts_with("https://"))) {
            return Err(ConfigError::Endpoint(bad.clone()));
        }
        let mut names = std::collections::HashSet::from([crate::shard::DEFAULT]);
        for s in &self.shards {
            if crate::meta::validate_dns1123_label(&s.name).is_err() {
                return Err(ConfigError::Shard(format!("{:?}: a name must be a DNS-1123 label", s.name)));
            }
            if !names.insert(&s.name) {
                let taken =
                    if s.name == crate::shard::DEFAULT { "names the --etcd-servers shard" } else { "is given twice" };
                return Err(ConfigError::Shard(format!("{:?} {taken}", s.name)));
            }
            let base = crate::shard::revision_base(&s.name);
            if let Some(other) =
                self.shards.iter().find(|o| o.name != s.name && crate::shard::revision_base(&o.name) == base)
            {
                return Err(ConfigError::Shard(format!(
                    "{:?} and {:?} would share a range of resourceVersions; rename one",
                    s.name, other.name
                )));
            }
            if s.endpoints.is_empty() {
                return Err(ConfigError::Shard(format!("{:?}: no etcd endpoint", s.name)));
            }
            if let Some(bad) = s.endpoints.iter().find(|e| !(e.starts_with("http://") || e.starts_with("https://"))) {
                return Err(ConfigError::Shard(format!("{}: {bad:?} is not an http(s):// URL", s.name)));
            }
        }
        if let Some(dir) = self.tenants_dir.as_ref().filter(|d| !d.is_dir()) {
            return Err(ConfigError::TenantsDir(dir.clone()));
        }
        Ok(())
    }

    /// The URL clients use to reach this server.
    pub fn server_url(&self) -> String {
        let host = match self.listen.ip() {
            ip if ip.is_unspecified() => "127.0.0.1".to_string(),
            std::net::IpAddr::V6(ip) => format!("[{ip}]"),
            ip => ip.to_string(),
        };
        format!("https://{host}:{}", self.listen.port())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_are_caught() {
        assert!(Config::default().validate().is_ok());
        let c = Config { etcd_prefix: "registry/".into(), ..Default::default() };
        assert!(c.validate().is_err());
        let c = Config { etcd_servers: vec!["localhost:2379".into()], ..Default::default() };
        assert!(c.validate().is_err());
        let c = Config { tenants_dir: Some("/nonexistent/tenants".into()), ..Default::default() };
        assert!(matches!(c.validate(), Err(ConfigError::TenantsDir(_))));
        let c = Config { tenants_dir: Some(std::env::temp_dir()), ..Default::default() };
        assert!(c.validate().is_ok());
        let shard = |s: &str| s.parse::<ShardConfig>().unwrap();
        assert_eq!(
            shard("b=http://127.0.0.1:1,http://127.0.0.1:2"),
            ShardConfig { name: "b".into(), endpoints: vec!["http://127.0.0.1:1".into(), "http://127.0.0.1:2".into()] }
        );
        assert!("b".parse::<ShardConfig>().is_err());
        for bad in
            [vec!["default=http://x"], vec!["b=http://x", "b=http://y"], vec!["B=http://x"], vec!["b="], vec!["b=x:1"]]
        {
            let c = Config { shards: bad.iter().map(|s| shard(s)).collect(), ..Default::default() };
            assert!(matches!(c.validate(), Err(ConfigError::Shard(_))), "{bad:?}");
        }
        let c = Config { shards: vec![shard("b=http://x"), shard("c=https://y")], ..Default::default() };
        assert!(c.validate().is_ok());
        assert_eq!(
            Config { listen: "0.0.0.0:7000".parse().unwrap(), ..Default::default() }.server_url(),
            "https://127.0.0.1:7000"
        );
    }
}
