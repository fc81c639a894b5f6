//! Start a kgate server from a `Config`: open the store, load the PKI, bootstrap root, apply the tenants
//! directory, run the background tasks (cluster directory, LogicalCluster lifecycle, compaction) and
//! serve until told to stop.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpSocket;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{Config, ConfigError};
use crate::http::handler::AppState;
use crate::metrics::Metrics;
use crate::registry::Registry;
use crate::storage::{embedded::EmbeddedStore, etcd::EtcdStore, Store, StoreError};
use crate::tenancy::{self, Directory};

/// Failures before the server is up.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store could not be opened.
    #[error("opening the store: {0}")]
    Store(#[from] StoreError),
    /// The PKI could not be created or read.
    #[error(transparent)]
    Pki(#[from] crate::pki::PkiError),
    /// TLS set-up.
    #[error(transparent)]
    Tls(#[from] crate::http::server::TlsError),
    /// Binding the listener.
    #[error("listening on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Reading a configured file.
    #[error("{0}")]
    Io(String),
    /// Bootstrapping root.
    #[error("bootstrapping root: {0}")]
    Bootstrap(String),
    /// The tenants directory could not be listed.
    #[error(transparent)]
    Tenants(#[from] tenancy::ManifestError),
}

/// A running server.
pub struct Running {
    /// The bound address.
    pub addr: SocketAddr,
    /// The URL clients use.
    pub url: String,
    /// Send `true` to stop.
    pub shutdown: watch::Sender<bool>,
    /// Finishes when the server has stopped.
    pub done: JoinHandle<()>,
    /// The store it serves from.
    pub store: Arc<dyn Store>,
}

/// Open the configured store.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, StoreError> {
    if config.etcd_servers.is_empty() {
        Ok(Arc::new(EmbeddedStore::open(&config.data_dir.join("store"))?))
    } else {
        Ok(Arc::new(connect_etcd(&config.etcd_servers, &config.etcd_tls).await?))
    }
}

/// The longest pause between two tries to reach etcd at start.
const CONNECT_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Connect to etcd, retrying with backoff while it does not answer, and saying which etcd: one that
/// starts after kgate (beside it in a pod, or later in a boot) is waited for, not met with an exit
/// and a bare "tcp connect error". A missing TLS file is a mistake to report at once.
async fn connect_etcd(endpoints: &[String], tls: &crate::storage::etcd::EtcdTls) -> Result<EtcdStore, StoreError> {
    for file in [&tls.ca_file, &tls.cert_file, &tls.key_file].into_iter().flatten() {
        std::fs::metadata(file).map_err(|e| StoreError::Internal(format!("{}: {e}", file.display())))?;
    }
    let mut pause = std::time::Duration::from_millis(500);
    loop {
        // The client connects lazily: a consistent read shows whether etcd (a quorum of it) answers.
        let store = match EtcdStore::connect(endpoints, tls).await {
            Ok(store) => store.revision().await.map(|_| store),
            Err(e) => Err(e),
        };
        match store {
            Ok(store) => return Ok(store),
            Err(e) => {
                tracing::warn!(
                    endpoints = %endpoints.join(","),
                    error = %e,
                    retry_in_ms = pause.as_millis() as u64,
                    "etcd does not answer; trying again"
                );
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(CONNECT_BACKOFF_MAX);
            }
        }
    }
}

/// Bring the server up; returns once it accepts connections.
pub async fn start(mut config: Config) -> Result<Running, StartError> {
    config.validate()?;
    let bind_error = |source| StartError::Bind { addr: config.listen, source };
    // Bound first (the URL in the admin kubeconfig needs the port when it is 0), but listening only once
    // the PKI and the kubeconfig are on disk: whoever waits for the port can then use them at once.
    let socket = if config.listen.is_ipv4() { TcpSocket::new_v4() } else { TcpSocket::new_v6() }.map_err(bind_error)?;
    socket.set_reuseaddr(true).map_err(bind_error)?;
    socket.bind(config.listen).map_err(bind_error)?;
    let addr = socket.local_addr().map_err(bind_error)?;
    config.listen = addr;
    let url = config.server_url();
    let pki = crate::pki::ensure(&config.data_dir, &addr.ip().to_string(), &url)?;
    let listener = socket.listen(1024).map_err(|source| StartError::Bind { addr, source })?;
    let (cert_pem, key_pem) = match (&config.tls_cert_file, &config.tls_key_file) {
        (Some(c), Some(k)) => (
            std::fs::read_to_string(c).map_err(|e| StartError::Io(format!("{}: {e}", c.display())))?,
            std::fs::read_to_string(k).map_err(|e| StartError::Io(format!("{}: {e}", k.display())))?,
        ),
        _ => (pki.serving.cert_pem.clone(), pki.serving.key_pem.clone()),
    };
    let tls = crate::http::server::tls_config(&cert_pem, &key_pem, &pki.ca.cert_pem)?;
    let metrics = Metrics::new(prometheus::Registry::new()).map_err(|e| StartError::Io(e.to_string()))?;
    let mut store: Arc<dyn Store> =
        Arc::new(crate::storage::metered::Metered::new(open_store(&config).await?, metrics.store.clone()));
    if !config.shards.is_empty() {
        // Its revisions are its own, below every other shard's: another's are refused as too old.
        store = crate::storage::based::based(store, 0);
    }
    // Clients in a cluster find the server through `default/kubernetes`: the advertised address, else
    // the listen address; an unspecified one gives them loopback, as there is no one interface to name.
    let ip = match config.advertise_address.unwrap_or(addr.ip()) {
        ip if !ip.is_unspecified() => ip,
        std::net::IpAddr::V4(_) => std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        std::net::IpAddr::V6(_) => std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    };
    let published = crate::registry::Published { ca_pem: pki.ca.cert_pem.clone(), ip, port: addr.port() };
    // Each other shard's registry reaches root (LogicalClusters) through the default shard's store.
    let mut others = Vec::new();
    let moves: Arc<crate::shard::Moves> = Default::default();
    for s in &config.shards {
        let own = crate::storage::metered::Metered::new(
            // Not waited for: a shard down at start costs only its own clusters (they answer 503).
            Arc::new(EtcdStore::connect(&s.endpoints, &config.etcd_tls).await?),
            metrics.store.clone(),
        );
        let own = crate::storage::based::based(Arc::new(own), crate::shard::revision_base(&s.name));
        let routed = crate::storage::routed::Routed::new(own, store.clone(), &config.etcd_prefix);
        let r = Registry::new(Arc::new(routed), config.etcd_prefix.clone())
            .publishing(published.clone())
            .on_shard(&s.name)
            .with_moves(moves.clone());
        others.push((s.name.clone(), r));
    }
    let shards = crate::shard::Shards::new(others.clone());
    let registry = Registry::new(store.clone(), config.etcd_prefix.clone())
        .publishing(published)
        .with_shards(shards.clone())
        .with_moves(moves);
    tenancy::reconcile_defaults(&registry, crate::cluster::ROOT)
        .await
        .map_err(|e| StartError::Bootstrap(e.message.clone()))?;
    if let Some(dir) = &config.tenants_dir {
        // Before serving, so that "serving" means the tenants in the directory exist. Bad files are
        // logged and skipped inside.
        let applied = tenancy::apply_dir(&registry, dir).await?;
        tracing::info!(dir = %dir.display(), clusters = applied.clusters.len(), errors = applied.errors.len(), "tenants directory applied");
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let directory = Directory::new(registry.clone());
    let audit = match &config.audit {
        Some(a) => {
            let policy = crate::audit::Policy::load(&a.policy_file).map_err(|e| StartError::Io(e.to_string()))?;
            let auditor = crate::audit::Auditor::start(policy, a.log.clone(), metrics.audit.clone());
            Some(Arc::new(auditor.map_err(|e| StartError::Io(e.to_string()))?))
        }
        None => None,
    };
    let signer = crate::token::Signer::load_or_create(store.as_ref(), &config.etcd_prefix).await?;
    let authz = Arc::new(crate::authz::Authorizer::new(registry.clone()));
    // Loaded before serving, so that every custom resource is served from the first request.
    let crds = crate::crd::CrdIndex::new(registry.clone());
    let crds_revision = crds.load().await.map_err(|e| StartError::Bootstrap(e.to_string()))?;
    // Another shard down at start does not keep the server from serving the rest: its index loads
    // once it answers (`CrdIndex::run` reloads until then), and its clusters answer 503 meanwhile.
    let mut served = Vec::new();
    for (name, r) in &others {
        let index = crate::crd::CrdIndex::new(r.clone());
        let from = match tokio::time::timeout(crate::http::fanout::PATIENCE, index.load()).await {
            Ok(Ok(rev)) => rev,
            Ok(Err(e)) => {
                tracing::warn!(shard = %name, error = %e, "loading the CRDs of a shard; retrying in the background");
                0
            }
            Err(_) => {
                tracing::warn!(shard = %name, "the shard did not answer; its CRDs load once it does");
                0
            }
        };
        served.push((r.clone(), index, Arc::new(crate::authz::Authorizer::new(r.clone())), from));
    }
    let state = Arc::new(
        AppState::new(
            registry.clone(),
            directory.clone(),
            shutdown_rx.clone(),
            metrics,
            authz.clone(),
            signer,
            crds.clone(),
        )
        .with_shards(served.iter().map(|(r, c, a, _)| (r.clone(), c.clone(), a.clone())).collect())
        .with_limits(config.inflight, config.bytes)
        .with_audiences(config.api_audiences.clone())
        .with_usage(config.metrics_top_clusters, config.usage_accounting)
        .with_audit(audit),
    );
    // The singleton work runs on the replica that holds the controllers' lease (see `leader`).
    let (leading, election) =
        crate::leader::start(registry.clone(), crate::leader::identity(addr.port()), shutdown_rx.clone());
    // Also resumes, at start, the purges of clusters deleted before a restart and the bootstraps one cut
    // short. It stops with the server (awaited below), so no purge outlives it.
    let lifecycle = tokio::spawn(crate::leader::while_leading(leading.clone(), {
        let (registry, shutdown) = (registry.clone(), shutdown_rx.clone());
        move || tenancy::Lifecycle::new(registry.clone()).run(shutdown.clone())
    }));
    let (usage, compaction) = (config.usage_accounting, config.compaction_interval);
    let mut background = vec![
        tokio::spawn(authz.watch_invalidations()),
        tokio::spawn(state.token_checks.clone().watch(registry.clone())),
        tokio::spawn(crds.clone().run(crds_revision, shutdown_rx.clone())),
        tokio::spawn(crds.clone().clean_deleted()),
        tokio::spawn(registry.clone().run_counts(usage)),
        tokio::spawn(directory.run()),
        tokio::spawn(crate::leader::while_leading(leading.clone(), {
            let registry = registry.clone();
            move || registry.clone().run_usage_status_if(usage)
        })),
        tokio::spawn(crate::leader::while_leading(leading.clone(), {
            let registry = registry.clone();
            move || compactor(registry.clone(), compaction)
        })),
        // Every replica, at its start: what a crash of this replica cut short (a namespace's cleanup,
        // a cluster's bootstrap) is resumed without waiting for the leader to change. Both idempotent.
        tokio::spawn(resume_namespace_deletions(registry.clone())),
        tokio::spawn(tenancy::resume_bootstraps(registry.clone())),
        tokio::spawn(crate::leader::while_leading(leading.clone(), {
            let registry = registry.clone();
            move || registry.clone().run_quota_resync()
        })),
        tokio::spawn(crate::leader::while_leading(leading.clone(), {
            let (registry, crds) = (registry.clone(), crds.clone());
            move || crate::gc::Collector::new(registry.clone(), crds.clone()).run()
        })),
    ];
    // Each other shard's store work: what the default shard's tasks above do for theirs.
    for (r, index, authz, from) in served {
        background.extend([
            tokio::spawn(authz.watch_invalidations()),
            tokio::spawn(state.token_checks.clone().watch(r.clone())),
            tokio::spawn(index.clone().run(from, shutdown_rx.clone())),
            tokio::spawn(index.clone().clean_deleted()),
            tokio::spawn(r.clone().run_counts(usage)),
            tokio::spawn(resume_namespace_deletions(r.clone())),
            tokio::spawn(crate::leader::while_leading(leading.clone(), {
                let r = r.clone();
                move || r.clone().run_usage_status_if(usage)
            })),
            tokio::spawn(crate::leader::while_leading(leading.clone(), {
                let r = r.clone();
                move || compactor(r.clone(), compaction)
            })),
            tokio::spawn(crate::leader::while_leading(leading.clone(), {
                let r = r.clone();
                move || r.clone().run_quota_resync()
            })),
            tokio::spawn(crate::leader::while_leading(leading.clone(), {
                let (r, index) = (r.clone(), index.clone());
                move || crate::gc::Collector::new(r.clone(), index.clone()).run()
            })),
        ]);
    }
    let server_address = addr.to_string();
    let connections = fit_connections(config.connections);
    let caches: Vec<_> = state.shards.iter().map(|s| s.cache.clone()).collect();
    let shard_registries: Vec<Registry> = others.into_iter().map(|(_, r)| r).collect();
    let held = store.clone();
    let done = tokio::spawn(async move {
        crate::http::server::serve(listener, tls, state, server_address, connections, shutdown_rx).await;
        // Gives the lease up while the store is still open, so another replica leads at once.
        let _ = election.await;
        registry.close();
        drop(registry);
        shard_registries.iter().for_each(Registry::close);
        drop(shard_registries);
        for cache in caches {
            cache.shutdown().await;
        }
        for t in background {
            t.abort();
            let _ = t.await;
        }
        // `done` means only the caller's handle (`Running::store`) and this one still hold the store, so
        // a new server can open the same data dir at once. Watch and connection tasks notice the shutdown
        // on their own and drop theirs within moments.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while Arc::strong_count(&held) > 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let _ = lifecycle.await;
    });
    tracing::info!(%url, data_dir = %config.data_dir.display(), store = if config.etcd_servers.is_empty() { "embedded" } else { "etcd" }, "kgate is serving");
    Ok(Running { addr, url, shutdown: shutdown_tx, done, store })
}

/// Descriptors kept for everything but client connections: the store's files or etcd connections, the
/// data dir, logs.
const RESERVED_FDS: u64 = 256;

/// Raise the open-file soft limit to the hard limit, as Go programs (kube-apiserver among them) do at
/// start, since the soft limit a service inherits is often 1,024; then keep the connection cap within
/// what is left, so that clients run out of connections before kgate runs out of descriptors.
fn fit_connections(mut limits: crate::http::server::ConnLimits) -> crate::http::server::ConnLimits {
    let files = match rlimit::increase_nofile_limit(u64::MAX) {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(error = %e, "could not read or raise the open-file limit");
            return limits;
        }
    };
    let room = usize::try_from(files.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX).max(1);
    if limits.max == 0 {
        // "As many as allowed": what the descriptors leave room for.
        limits.max = room;
    } else if limits.max > room {
        tracing::warn!(
            open_files = files,
            requested = limits.max,
            connections = room,
            "the open-file limit leaves room for fewer connections than --max-connections; capping them"
        );
        limits.max = room;
    }
    tracing::info!(open_files = files, max_connections = limits.max, "open-file limit");
    limits
}

/// Compact history older than one interval, every interval (what kube-apiserver does to etcd).
async fn compactor(registry: Registry, every: std::time::Duration) {
    let store = registry.store.clone();
    crate::leader::on_schedule(registry, "compaction", every, move |previous| {
        let store = store.clone();
        async move {
            if let Some(rev) = previous.filter(|r| *r > 0) {
                if let Err(e) = store.compact(rev).await {
                    tracing::warn!(error = %e, revision = rev, "compaction failed");
                }
            }
            // What the next run compacts to: history is kept for one period at least.
            store.revision().await.unwrap_or(0)
        }
    })
    .await
}

/// Namespaces left Terminating by a restart are emptied and removed.
async fn resume_namespace_deletions(registry: Registry) {
    let def = crate::resources::find("", "v1", "namespaces").expect("built in");
    let prefix = registry.collection(&def, None, None);
    // In pages: every cluster has namespaces, and a replica serving 100,000 clusters must not read them
    // all into memory at once.
    let found = crate::storage::range_pages(&*registry.store, &prefix, 1000, |kvs| {
        for kv in kvs {
            let Some(cluster) = registry.cluster_of(&def, &kv.key).map(str::to_string) else {
                continue;
            };
            let Ok(obj) = registry.decode(&def, &cluster, kv) else {
                continue;
            };
            if obj["metadata"].get("deletionTimestamp").is_some() {
                let name = crate::meta::meta_str(&obj, "name").unwrap_or_default().to_string();
                registry.spawn_namespace_cleanup(cluster, name);
            }
        }
        Ok::<_, StoreError>(())
    })
    .await;
    if let Err(e) = found {
        tracing::warn!(error = %e, "reading namespaces to resume their deletion; each resumes at its next DELETE or the next start");
    }
}
