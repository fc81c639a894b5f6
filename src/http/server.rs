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
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

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

/// Build the rustls server configuration.
pub fn tls_config(cert_pem: &str, key_pem: &str, client_ca_pem: &str) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|e| TlsError::Pem(e.to_string()))?;
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_slice_iter(client_ca_pem.as_bytes()) {
        roots.add(ca.map_err(|e| TlsError::Pem(e.to_string()))?).map_err(TlsError::Rustls)?;
    }
    // Client certificates are optional at the TLS layer: bearer tokens and anonymous health checks use
    // the same port; a presented certificate must chain to kgate's CA or the handshake fails.
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Verifier(e.to_string()))?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(cfg)
}

/// Accept connections until `shutdown` flips, then let in-flight requests finish (watches end on
/// their own when they see the same signal).
pub async fn serve(
    listener: TcpListener,
    tls: rustls::ServerConfig,
    state: Arc<AppState>,
    server_address: String,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    let acceptor = TlsAcceptor::from(Arc::new(tls));
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
        let acceptor = acceptor.clone();
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
