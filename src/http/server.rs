//! The listener: TLS (rustls, ALPN h2 and http/1.1, optional client certificates verified against
//! kgate's CA), HTTP/1.1 and HTTP/2 through hyper, and graceful shutdown.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::server::TlsStream;
use tokio_rustls::LazyConfigAcceptor;

use super::coalesce::Coalesce;
use super::handler::{handle, AppState, ConnInfo};

/// TLS set-up failures.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be parsed.
    #[error("reading PEM: {0}")]
    Pem(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}

/// The server's TLS configurations, one per cipher-suite order, picked per connection as Go's
/// crypto/tls (and so kube-apiserver) picks: AES-128-GCM first for a client whose own first choice is
/// AES-GCM (it has AES instructions), ChaCha20-Poly1305 first for a client that puts ChaCha20 first (it
/// has none, and ChaCha20 is the faster for it). rustls alone either follows the client's order, which
/// gives rustls and OpenSSL clients AES-256 (14 rounds where 10 do: encrypting a large list took about
/// a quarter longer), or one order of its own, which would give AES to clients without the instructions.
#[derive(Clone)]
pub struct Tls {
    aes: Arc<rustls::ServerConfig>,
    chacha: Arc<rustls::ServerConfig>,
    /// This machine has AES instructions; without them Go puts ChaCha20 first for every client.
    aes_here: bool,
}

/// Go's `hasAESGCMHardwareSupport`, for the architectures kgate is built for.
fn aes_in_hardware() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("aes") && std::arch::is_x86_feature_detected!("pclmulqdq");
    #[cfg(target_arch = "aarch64")]
    return std::arch::is_aarch64_feature_detected!("aes") && std::arch::is_aarch64_feature_detected!("pmull");
    #[allow(unreachable_code)]
    false
}

/// TLS 1.3's suites, then TLS 1.2's, as Go orders them when AES has hardware support.
const AES_FIRST: [rustls::CipherSuite; 9] = {
    use rustls::CipherSuite::*;
    [
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ]
};

/// Whether a suite is ChaCha20-Poly1305.
fn is_chacha(suite: rustls::CipherSuite) -> bool {
    use rustls::CipherSuite::*;
    matches!(
        suite,
        TLS13_CHACHA20_POLY1305_SHA256
            | TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
    )
}

/// Build the rustls server configurations.
pub fn tls_config(cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> Result<Tls, TlsError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::Pem(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots.add(ca.map_err(|e| TlsError::Pem(e.to_string()))?).map_err(TlsError::Rustls)?;
    }
    let roots = Arc::new(roots);
    let build = |chacha_first: bool| -> Result<rustls::ServerConfig, TlsError> {
        let mut provider = rustls::crypto::ring::default_provider();
        let rank = |s: &rustls::SupportedCipherSuite| {
            let at = AES_FIRST.iter().position(|&o| o == s.suite()).unwrap_or(AES_FIRST.len());
            (!(chacha_first && is_chacha(s.suite())), at)
        };
        provider.cipher_suites.sort_by_key(rank);
        let provider = Arc::new(provider);
        // Client certificates are optional at the TLS layer: bearer tokens and anonymous health checks
        // use the same port; a presented certificate must chain to kgate's CA or the handshake fails.
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .allow_unauthenticated()
            .build()
            .map_err(|e| TlsError::Verifier(e.to_string()))?;
        let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())?;
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        cfg.ignore_client_order = true;
        Ok(cfg)
    };
    let aes = build(false)?;
    let mut chacha = build(true)?;
    // One session cache, so a client resumes whichever order it met.
    chacha.session_storage = aes.session_storage.clone();
    Ok(Tls { aes: Arc::new(aes), chacha: Arc::new(chacha), aes_here: aes_in_hardware() })
}

impl Tls {
    /// Complete a TLS handshake on an accepted connection.
    pub async fn accept(&self, tcp: TcpStream) -> std::io::Result<TlsStream<TcpStream>> {
        let start = LazyConfigAcceptor::new(rustls::server::Acceptor::default(), tcp).await?;
        // The client's first suite that kgate serves tells whether it has AES instructions (unknown
        // values, such as GREASE, say nothing; Go also reads the CBC suites, which rustls does not
        // serve, so a client that puts AES-CBC before AES-GCM gets ChaCha20 from Go, if it offers it,
        // and AES-GCM here).
        let hello = start.client_hello();
        let first = hello.cipher_suites().iter().copied().find(|s| AES_FIRST.contains(s));
        let config = if !self.aes_here || first.is_some_and(is_chacha) { &self.chacha } else { &self.aes };
        start.into_stream(config.clone()).await
    }
}

/// Accept connections until `shutdown` flips, then let in-flight requests finish (watches end on
/// their own when they see the same signal).
pub async fn serve(
    listener: TcpListener,
    tls: Tls,
    state: Arc<AppState>,
    server_address: String,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = tls.clone();
        let state = state.clone();
        let server_address = server_address.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => return,
            };
            let identity = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|c| c.first())
                .and_then(|c| crate::auth::identity_from_der(c.as_ref()));
            let conn = Arc::new(ConnInfo { identity, server_address });
            let svc = service_fn(move |req| {
                let (state, conn) = (state.clone(), conn.clone());
                // Boxed: hyper spawns a task per HTTP/2 stream sized for this future, and keeps that
                // task for as long as the response body streams; unboxed, every open watch would hold
                // the request's whole handling state (about 650 bytes) after it has finished.
                Box::pin(async move { Ok::<_, Infallible>(handle(state, conn, req).await) })
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            // A client that never finishes its request headers must not hold a task forever.
            builder.http1().timer(TokioTimer::new()).header_read_timeout(Duration::from_secs(30));
            builder
                .http2()
                .timer(TokioTimer::new())
                .max_concurrent_streams(1000)
                .keep_alive_interval(Some(Duration::from_secs(30)))
                .keep_alive_timeout(Duration::from_secs(20));
            let conn = builder.serve_connection_with_upgrades(TokioIo::new(Coalesce::tls(tls)), svc);
            if let Err(e) = watcher.watch(conn.into_owned()).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    // In-flight writes finish; give long requests a bounded time.
    if tokio::time::timeout(Duration::from_secs(30), graceful.shutdown()).await.is_err() {
        tracing::warn!("some connections did not close within 30s");
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rustls::CipherSuite::*;

    /// A connection accepted by kgate's TLS and the client's end of it; the client offers its
    /// provider's suites in the order given by `client_suites` (rustls's own order when `None`).
    pub(crate) async fn pair(
        client_suites: Option<&[rustls::CipherSuite]>,
    ) -> (TlsStream<TcpStream>, tokio_rustls::client::TlsStream<TcpStream>) {
        let dir = tempfile::tempdir().unwrap();
        let pki = crate::pki::ensure(dir.path(), "127.0.0.1", "https://127.0.0.1:1").unwrap();
        let server = tls_config(&pki.serving.cert_pem, &pki.serving.key_pem, &pki.ca.cert_pem).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from_pem_slice(pki.ca.cert_pem.as_bytes()).unwrap()).unwrap();
        let mut provider = rustls::crypto::ring::default_provider();
        if let Some(order) = client_suites {
            provider.cipher_suites =
                order.iter().map(|want| *provider.cipher_suites.iter().find(|s| s.suite() == *want).unwrap()).collect();
        }
        let client = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accept = tokio::spawn(async move { server.accept(listener.accept().await.unwrap().0).await.unwrap() });
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
        let peer = tokio_rustls::TlsConnector::from(Arc::new(client)).connect(name, tcp).await.unwrap();
        (accept.await.unwrap(), peer)
    }

    /// The suite a client offering `client_suites` (in that order) gets, as both ends report it.
    async fn negotiated(client_suites: Option<&[rustls::CipherSuite]>) -> rustls::CipherSuite {
        let (server, client) = pair(client_suites).await;
        let suite = server.get_ref().1.negotiated_cipher_suite().unwrap().suite();
        assert_eq!(client.get_ref().1.negotiated_cipher_suite().unwrap().suite(), suite);
        suite
    }

    /// kube-apiserver's choice (Go's crypto/tls): AES-128-GCM for a client that prefers AES, whatever
    /// AES it prefers; ChaCha20 for a client that puts it first; what the client can do otherwise.
    #[tokio::test]
    async fn the_suite_is_chosen_as_go_chooses_it() {
        // rustls's and OpenSSL's clients put AES-256 first.
        assert_eq!(negotiated(None).await, TLS13_AES_128_GCM_SHA256);
        let chacha_first = [TLS13_CHACHA20_POLY1305_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256];
        assert_eq!(negotiated(Some(&chacha_first)).await, TLS13_CHACHA20_POLY1305_SHA256);
        assert_eq!(negotiated(Some(&[TLS13_AES_256_GCM_SHA384])).await, TLS13_AES_256_GCM_SHA384);
        let tls12 = [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256];
        assert_eq!(negotiated(Some(&tls12)).await, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256);
        let tls12_chacha = [TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256];
        assert_eq!(negotiated(Some(&tls12_chacha)).await, TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256);
    }
}
