//! kgate's own PKI: on first start a CA, a serving certificate and an admin client certificate (group
//! `system:masters`) are written to the data dir, with `admin.kubeconfig` pointing at root.

use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::json;

/// PKI failures.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// Reading or writing a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Generating or parsing a certificate.
    #[error("certificate: {0}")]
    Cert(#[from] rcgen::Error),
    /// Rendering YAML.
    #[error("kubeconfig: {0}")]
    Yaml(String),
}

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct CertPair {
    /// Certificate PEM.
    pub cert_pem: String,
    /// Private key PEM (PKCS#8).
    pub key_pem: String,
}

/// What a running server needs from the PKI.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA that signs serving and client certificates (and that clients trust).
    pub ca: CertPair,
    /// The serving certificate.
    pub serving: CertPair,
}

fn read(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PkiError::Io { path: path.to_path_buf(), source }),
    }
}

/// Write a file whole or not at all: a kill mid-write must not leave a truncated key that the next
/// start would refuse, and a reader (a script waiting for the kubeconfig) never sees half of one. A
/// secret is created readable by its owner only, never briefly readable by others.
fn write(path: &Path, contents: &str, secret: bool) -> Result<(), PkiError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let io = |source| PkiError::Io { path: path.to_path_buf(), source };
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    // A leftover of a write cut short may have other permissions: start from a new file.
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if secret { 0o600 } else { 0o644 })
        .open(&tmp)
        .map_err(io)?;
    f.write_all(contents.as_bytes()).and_then(|_| f.sync_all()).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

fn load_pair(dir: &Path, name: &str) -> Result<Option<CertPair>, PkiError> {
    let cert = read(&dir.join(format!("{name}.crt")))?;
    let key = read(&dir.join(format!("{name}.key")))?;
    Ok(match (cert, key) {
        (Some(cert_pem), Some(key_pem)) => Some(CertPair { cert_pem, key_pem }),
        _ => None,
    })
}

fn store_pair(dir: &Path, name: &str, pair: &CertPair) -> Result<(), PkiError> {
    write(&dir.join(format!("{name}.crt")), &pair.cert_pem, false)?;
    write(&dir.join(format!("{name}.key")), &pair.key_pem, true)
}

fn new_ca() -> Result<CertPair, PkiError> {
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "kgate-ca");
    params.distinguished_name = dn;
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.not_after = rcgen::date_time_ymd(2036, 1, 1);
    let cert = params.self_signed(&key)?;
    Ok(CertPair { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// Sign a certificate with the CA.
fn sign(ca: &CertPair, mut params: CertificateParams) -> Result<CertPair, PkiError> {
    let ca_key = KeyPair::from_pem(&ca.key_pem)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert_pem, ca_key)?;
    let key = KeyPair::generate()?;
    params.not_after = rcgen::date_time_ymd(2035, 1, 1);
    let cert = params.signed_by(&key, &issuer)?;
    Ok(CertPair { cert_pem: cert.pem(), key_pem: key.serialize_pem() })
}

/// A client certificate: CN is the user name, each O a group (how kube-apiserver reads them).
pub fn client_cert(ca: &CertPair, user: &str, groups: &[&str]) -> Result<CertPair, PkiError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, user);
    for g in groups {
        dn.push(DnType::OrganizationName, *g);
    }
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    sign(ca, params)
}

fn serving_cert(ca: &CertPair, hosts: &[String]) -> Result<CertPair, PkiError> {
    let mut params = CertificateParams::new(hosts.to_vec())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "kgate");
    params.distinguished_name = dn;
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    sign(ca, params)
}

/// The host names and addresses the serving certificate covers.
pub fn serving_hosts(listen_host: &str) -> Vec<String> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let h = listen_host.trim_start_matches('[').trim_end_matches(']');
    if !h.is_empty() && h != "0.0.0.0" && h != "::" && !hosts.iter().any(|x| x == h) {
        hosts.push(h.to_string());
    }
    hosts
}

/// Load the PKI from `dir`, creating what is missing; also writes `admin.kubeconfig` on first start.
/// `server_url` is what the admin kubeconfig points at.
pub fn ensure(dir: &Path, listen_host: &str, server_url: &str) -> Result<Pki, PkiError> {
    std::fs::create_dir_all(dir).map_err(|source| PkiError::Io { path: dir.to_path_buf(), source })?;
    let ca = match load_pair(dir, "ca")? {
        Some(ca) => ca,
        None => {
            let ca = new_ca()?;
            store_pair(dir, "ca", &ca)?;
            ca
        }
    };
    let serving = match load_pair(dir, "serving")? {
        Some(s) => s,
        None => {
            let s = serving_cert(&ca, &serving_hosts(listen_host))?;
            store_pair(dir, "serving", &s)?;
            s
        }
    };
    let kubeconfig_path = dir.join("admin.kubeconfig");
    if read(&kubeconfig_path)?.is_none() {
        let admin = client_cert(&ca, "kgate-admin", &["system:masters"])?;
        let yaml = kubeconfig(server_url, "root", &ca.cert_pem, &Credentials::Cert(admin), None)?;
        write(&kubeconfig_path, &yaml, true)?;
    }
    Ok(Pki { ca, serving })
}

/// How a kubeconfig user authenticates.
pub enum Credentials {
    /// A client certificate.
    Cert(CertPair),
    /// A bearer token.
    Token(String),
}

/// Render a kubeconfig for one logical cluster (`server_url` already includes `/clusters/<name>` for
/// clusters other than root).
pub fn kubeconfig(
    server_url: &str,
    name: &str,
    ca_pem: &str,
    creds: &Credentials,
    namespace: Option<&str>,
) -> Result<String, PkiError> {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
    let user = match creds {
        Credentials::Cert(c) => {
            json!({"client-certificate-data": b64(&c.cert_pem), "client-key-data": b64(&c.key_pem)})
        }
        Credentials::Token(t) => json!({"token": t}),
    };
    let mut context = json!({"cluster": name, "user": name});
    if let Some(ns) = namespace {
        context["namespace"] = json!(ns);
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server_url, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": name, "user": user}],
        "contexts": [{"name": name, "context": context}],
        "current-context": name,
    });
    serde_yaml_ng::to_string(&doc).map_err(|e| PkiError::Yaml(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_start_writes_everything_and_second_start_reuses_it() {
        let dir = tempfile::tempdir().unwrap();
        // A write cut short by a kill left a world-readable temporary file behind.
        std::fs::write(dir.path().join("ca.key.tmp"), "half a key").unwrap();
        let a = ensure(dir.path(), "127.0.0.1", "https://127.0.0.1:6443").unwrap();
        use std::os::unix::fs::PermissionsExt;
        for f in ["ca.crt", "serving.crt"] {
            assert!(dir.path().join(f).exists(), "{f}");
        }
        for f in ["ca.key", "serving.key", "admin.kubeconfig"] {
            let mode = std::fs::metadata(dir.path().join(f)).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "{f} is readable by its owner only: {mode:o}");
        }
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 5, "no temporary file is left: {names:?}");
        let b = ensure(dir.path(), "127.0.0.1", "https://127.0.0.1:6443").unwrap();
        assert_eq!(a.ca.cert_pem, b.ca.cert_pem);
        let kc = std::fs::read_to_string(dir.path().join("admin.kubeconfig")).unwrap();
        assert!(kc.contains("server: https://127.0.0.1:6443"));
        assert!(kc.contains("client-certificate-data"));
    }

    #[test]
    fn serving_hosts_skip_wildcards() {
        assert_eq!(serving_hosts("0.0.0.0").len(), 3);
        assert!(serving_hosts("10.1.2.3").contains(&"10.1.2.3".to_string()));
    }
}
