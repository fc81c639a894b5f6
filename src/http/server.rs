//! The listener: TLS (rustls, ALPN h2 and http/1.1, optional client certificates verified against
//! kgate's CA), HTTP/1.1 and HTTP/2 through hyper, and graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::server::TlsStream;
use tokio_rustls::LazyConfigAcceptor;

use super::coalesce::Coalesce;
use super::conn::{judge, Activity, Timeouts, Verdict};
use super::handler::{AppState, ConnInfo};
pub use crate::config::ConnLimits;

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

/// The longest pause after a failed accept (Go's `net/http` doubles from 5 ms up to 1 s).
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long a connection accepted at the cap waits for the slot of the one evicted for it.
const EVICTION_WAIT: Duration = Duration::from_secs(2);

/// Close a connection accepted past the cap, counting it, with a log line at most every 10 s.
fn refuse(state: &AppState, since_log: &mut u64, last_log: &mut Option<std::time::Instant>, limit: usize) {
    state.metrics.connections_refused.inc();
    *since_log += 1;
    if last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
        tracing::warn!(
            limit,
            refused = *since_log,
            "connection limit reached (--max-connections) and every connection busy: closing new connections until some end"
        );
        *last_log = Some(std::time::Instant::now());
        *since_log = 0;
    }
}

/// Accept connections until `shutdown` flips, then let in-flight requests finish (watches end on
/// their own when they see the same signal).
pub async fn serve(
    listener: TcpListener,
    tls: Tls,
    state: Arc<AppState>,
    server_address: String,
    limits: ConnLimits,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) {
    // Without a limit, as many slots as can be waited for at shutdown.
    let max = if limits.max == 0 { u32::MAX as usize } else { limits.max };
    let slots = Arc::new(Semaphore::new(max));
    let open = Arc::new(super::conn::Open::default());
    // Assembled once; each connection's requests run through clones of it.
    let edge = super::edge::stack(&state);
    let mut backoff: Option<Duration> = None;
    let mut refused_since_log = 0u64;
    let mut last_refusal_log: Option<std::time::Instant> = None;
    loop {
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of descriptors (EMFILE) or memory: wait for some to come back rather than spin.
                    let pause = backoff.map_or(Duration::from_millis(5), |d| (d * 2).min(ACCEPT_BACKOFF_MAX));
                    backoff = Some(pause);
                    tracing::warn!(error = %e, retry_in_ms = pause.as_millis() as u64, "accept failed");
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => continue,
                        _ = shutdown.changed() => break,
                    }
                }
            },
            _ = shutdown.changed() => break,
        };
        backoff = None;
        // At the cap, the connection idle longest makes room (its slot comes free as it closes);
        // only when every open connection is busy is the new one refused.
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => Some(slot),
            Err(_) if open.evict_idlest() => None,
            Err(_) => {
                drop(tcp);
                refuse(&state, &mut refused_since_log, &mut last_refusal_log, limits.max);
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let conn = Connection {
            tls: tls.clone(),
            state: state.clone(),
            edge: edge.clone(),
            server_address: server_address.clone(),
            timeouts: limits.timeouts,
            shutdown: shutdown.clone(),
            open: open.clone(),
        };
        let slots = slots.clone();
        tokio::spawn(async move {
            let _slot = match slot {
                Some(slot) => slot,
                // The slot of the connection told to close; it goes within moments.
                None => match tokio::time::timeout(EVICTION_WAIT, slots.acquire_owned()).await {
                    Ok(Ok(slot)) => slot,
                    _ => return,
                },
            };
            let open = conn.state.metrics.connections.clone();
            open.inc();
            conn.run(tcp, peer).await;
            open.dec();
        });
    }
    // In-flight writes finish; give long requests a bounded time. Every connection holds a slot until
    // its task ends, so all slots back means all connections closed.
    let all = u32::try_from(max).unwrap_or(u32::MAX);
    if tokio::time::timeout(Duration::from_secs(30), slots.acquire_many(all)).await.is_err() {
        tracing::warn!("some connections did not close within 30s");
    }
}

/// One accepted connection and what serving it needs.
struct Connection {
    tls: Tls,
    state: Arc<AppState>,
    /// The request path (see `edge::stack`).
    edge: super::edge::Edge,
    server_address: String,
    timeouts: Timeouts,
    shutdown: tokio::sync::watch::Receiver<bool>,
    /// Every open connection, this one among them from its accept.
    open: Arc<super::conn::Open>,
}

impl Connection {
    async fn run(mut self, tcp: TcpStream, peer: std::net::SocketAddr) {
        // Open from its accept, so that at the cap a connection still in its handshake can be told to
        // close: else connections that never finish one (anyone can open them, no credentials asked)
        // would hold their slots for the whole handshake deadline and push out the clients' own.
        let activity = Activity::new();
        let open = self.open.clone();
        let registered = open.add(activity.clone());
        let handshake = tokio::time::timeout(self.timeouts.handshake, self.tls.accept(tcp));
        let tls = tokio::select! {
            done = handshake => match done {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!(%peer, "TLS handshake timed out");
                    return;
                }
            },
            _ = registered.close.notified() => {
                tracing::debug!(%peer, "closed in its TLS handshake to make room at the connection cap");
                return;
            }
        };
        activity.handshaken();
        let session = tls.get_ref().1;
        let identity = session
            .peer_certificates()
            .and_then(|c| c.first())
            .and_then(|c| crate::auth::identity_from_der(c.as_ref()));
        // As Go's server: HTTP/2 only when ALPN chose it. Guessing from the first bytes instead would
        // wait, with no deadline, for 24 bytes a silent client never sends.
        let h2 = session.alpn_protocol() == Some(b"h2");
        let info = Arc::new(ConnInfo { identity, peer: Some(peer), server_address: self.server_address.clone() });
        let (edge, requests) = (self.edge.clone(), activity.clone());
        let svc = service_fn(move |req| {
            let (edge, info, request) = (edge.clone(), info.clone(), requests.begin());
            // Boxed: hyper spawns a task per HTTP/2 stream sized for this future, and keeps that
            // task for as long as the response body streams; unboxed, every open watch would hold
            // the request's whole entry state after it has finished.
            Box::pin(super::edge::serve(edge, info, req, request))
        });
        let mut builder = auto::Builder::new(TokioExecutor::new());
        builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT);
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_concurrent_streams(1000)
            .keep_alive_interval(Some(Duration::from_secs(30)))
            .keep_alive_timeout(Duration::from_secs(20));
        let builder = if h2 { builder.http2_only() } else { builder.http1_only() };
        let conn = builder.serve_connection(TokioIo::new(Coalesce::tls(tls)), svc);
        let mut conn = std::pin::pin!(conn);
        let mut closing = false;
        loop {
            let next = match judge(activity.snapshot(), &self.timeouts) {
                Verdict::Open(at) => activity.at(at),
                Verdict::NoRequest => {
                    tracing::debug!(%peer, "no request within the first-request deadline; closing");
                    return;
                }
                Verdict::Stalled => {
                    self.state.metrics.connections_stalled.inc();
                    tracing::info!(%peer, "the client has not read its responses for {:?}; closing the connection", self.timeouts.stalled);
                    return;
                }
                Verdict::Idle if closing => {
                    // It had its graceful close already and still has not finished.
                    return;
                }
                Verdict::Idle => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                    tokio::time::Instant::now() + GRACE
                }
            };
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(%peer, error = ?e, "connection ended with an error");
                    }
                    return;
                }
                _ = tokio::time::sleep_until(next) => {}
                _ = activity.woken() => {}
                _ = self.shutdown.changed(), if !closing => {
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
                // Evicted to make room at the cap: idle when chosen, so a graceful close is at once; one that
                // never sent a request has no HTTP/2 session to close (hyper would wait for its preface).
                _ = registered.close.notified(), if !closing => {
                    if !activity.snapshot().served {
                        return;
                    }
                    closing = true;
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

/// What a client has to send a request's headers in, once it has begun (kube-apiserver:
/// `ReadHeaderTimeout`, 32 s). It also closes an HTTP/1.1 connection idle between requests.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(32);
/// How long a connection closed for idleness has to finish (HTTP/2: its GOAWAY).
const GRACE: Duration = Duration::from_secs(5);

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
